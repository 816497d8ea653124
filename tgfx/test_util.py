"""`check_grads`: automatic derivatives against finite differences, as `jax.test_util.check_grads`.

>>> import tgfx as tg, tgfx.numpy as tnp
>>> from tgfx.test_util import check_grads
>>> check_grads(lambda w, x: tnp.tanh(x @ w).sum(), (tnp.ones((3, 2)), tnp.ones((4, 3))), order=2)

Each check draws one random direction (numpy's RandomState(0), as JAX's), so it costs a few calls of the function
whatever its size: forward mode compares `jvp` with central differences along it, reverse mode compares the inner
product <vjp(ct), t> with <ct, differences along t>. Higher orders check the same of the `jvp` and `vjp` functions
themselves. Tolerances are JAX's, by dtype (float32: 2e-3), and like JAX's grow with the number of elements.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tgfx import numpy as tnp
from tgfx.tensor import Tensor
from tgfx.transforms.grad import vjp
from tgfx.transforms.jvp import jvp
from tgfx.tree import tree_leaves, tree_map

EPS = 1e-4
# JAX's default_gradient_tolerance, by the dtype a value is checked in
GRADIENT_TOLERANCE = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3, np.dtype(np.float64): 1e-5,
                      np.dtype(np.complex64): 1e-3, np.dtype(np.complex128): 1e-5}


def _host(x: Any) -> np.ndarray:
    """A leaf as a numpy array (a Python float as the float32 it is traced as; bfloat16 comes back float32)."""
    if isinstance(x, float):
        return np.asarray(x, np.float32)
    if isinstance(x, complex):
        return np.asarray(x, np.complex64)
    return np.asarray(x)


def _like(x: Any, value: np.ndarray) -> Any:
    """`value` as a leaf of `x`'s kind: a Python scalar stays one, anything else is a Tensor of x's dtype."""
    if isinstance(x, (bool, int, float, complex)):
        return type(x)(value.item())
    return tnp.asarray(value, dtype=x.dtype if isinstance(x, Tensor) else _host(x).dtype)


def _rand_like(rng: np.random.RandomState, x: Any) -> Any:
    h = _host(x)   # (once: a Tensor's is a read of the device)
    shape, dtype = h.shape, h.dtype
    value = rng.randn(*shape)
    if np.issubdtype(dtype, np.complexfloating):
        value = value + 1j * rng.randn(*shape)
    return _like(x, np.asarray(value).astype(dtype))


def _numerical_jvp(f: Callable, primals: tuple, tangents: tuple, eps: float) -> Any:
    """Central differences of f along `tangents`, per output leaf, in float64 on the host."""
    def shifted(s: float) -> Any:
        return f(*tree_map(lambda x, t: _like(x, _host(x) + s * _host(t).astype(_host(x).dtype)), primals, tangents))
    plus, minus = shifted(eps), shifted(-eps)
    return tree_map(lambda p, m: (_host(p).astype(np.complex128 if np.iscomplexobj(_host(p)) else np.float64) -
                                  _host(m)) * (0.5 / eps), plus, minus)


def _tolerance(dtype: np.dtype, tol: float | dict | None) -> float:
    if tol is None or isinstance(tol, dict):
        table = {**GRADIENT_TOLERANCE, **{np.dtype(k): v for k, v in (tol or {}).items()}}
        return table.get(np.dtype(dtype), 0.0)
    return tol


def check_close(xs: Any, ys: Any, atol: float | dict | None = None, rtol: float | dict | None = None,
                err_msg: str = "") -> None:
    """Each leaf of `xs` close to `ys`'s, as JAX's check_close (tolerances by dtype, times the size)."""
    def close(x: Any, y: Any) -> None:
        a, b = _host(x), _host(y)
        if a.shape != b.shape:
            raise AssertionError(f"{err_msg}: shapes {a.shape} and {b.shape} differ")
        np.testing.assert_allclose(a, b, atol=_tolerance(a.dtype, atol) * a.size,
                                   rtol=_tolerance(a.dtype, rtol) * b.size, err_msg=err_msg)
    tree_map(close, xs, ys)


def _inner(xs: Any, ys: Any) -> float:
    return sum(float(np.real(np.vdot(_host(x).reshape(-1), _host(y).reshape(-1))))
               for x, y in zip(tree_leaves(xs), tree_leaves(ys), strict=True))


def check_jvp(f: Callable, f_jvp: Callable, args: tuple, atol: float | dict | None = None,
              rtol: float | dict | None = None, eps: float = EPS, err_msg: str = "") -> None:
    """`f_jvp(args, tangents)` (usually `partial(tg.jvp, f)`) against f's value and central differences."""
    tangents = tree_map(functools.partial(_rand_like, np.random.RandomState(0)), args)
    out, t_out = f_jvp(args, tangents)
    check_close(out, f(*args), atol, rtol, f"{err_msg} primal" if err_msg else "primal")
    check_close(t_out, _numerical_jvp(f, args, tangents, eps), atol, rtol, f"{err_msg} tangent" if err_msg
                else "tangent")


def check_vjp(f: Callable, f_vjp: Callable, args: tuple, atol: float | dict | None = None,
              rtol: float | dict | None = None, eps: float = EPS, err_msg: str = "") -> None:
    """`f_vjp(*args)` (usually `partial(tg.vjp, f)`): its pullback of a random cotangent, paired with a random
    tangent, against the cotangent paired with central differences along that tangent."""
    rng = np.random.RandomState(0)
    out, pullback = f_vjp(*args)
    check_close(out, f(*args), atol, rtol, f"{err_msg} primal" if err_msg else "primal")
    tangents = tree_map(functools.partial(_rand_like, rng), args)
    t_out = _numerical_jvp(f, args, tangents, eps)
    cotangents = tree_map(functools.partial(_rand_like, rng), out)
    pulled = pullback(tree_map(lambda c: _like(c, np.conj(_host(c))), cotangents))
    got = _inner(tangents, tree_map(lambda c: np.conj(_host(c)), pulled))
    want = _inner(t_out, cotangents)
    check_close(got, want, atol, rtol, f"{err_msg} cotangent projection" if err_msg else "cotangent projection")


def check_grads(f: Callable, args: Sequence[Any], order: int, modes: Sequence[str] = ("fwd", "rev"),
                atol: float | dict | None = None, rtol: float | dict | None = None, eps: float | None = None) -> None:
    """Check f's derivatives at `args` up to `order` against finite differences (AssertionError if they differ):
    forward mode ("fwd") with `tg.jvp`, reverse mode ("rev") with `tg.vjp`, each of their own derivatives for the
    orders above the first. As `jax.test_util.check_grads`."""
    eps = eps or EPS

    def check(f: Callable, args: tuple, order: int, what: str) -> None:
        if "fwd" in modes:
            msg = f"JVP of {what}" if what else "JVP"
            check_jvp(f, functools.partial(jvp, f), args, atol, rtol, eps, msg)
            if order > 1:
                check(functools.partial(jvp, f), (args, args), order - 1, msg)
        if "rev" in modes:
            msg = f"VJP of {what}" if what else "VJP"
            check_vjp(f, functools.partial(vjp, f), args, atol, rtol, eps, msg)
            if order > 1:
                def f_vjp(*args: Any) -> Any:
                    out, pullback = vjp(f, *args)
                    return pullback(out)
                check(f_vjp, args, order - 1, msg)
    check(f, tuple(args), order, "")
