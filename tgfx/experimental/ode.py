"""`tg.experimental.ode.odeint`: `jax.experimental.ode.odeint`, an adaptive Dormand-Prince (RK45) solver of
dy/dt = func(y, t, *args) whose reverse-mode gradient is the adjoint method.

The forward pass is a `lax.scan` over the requested times; between two of them a `lax.while_loop` takes RK45 steps
(error per step estimated by the embedded 4th-order solution, step sizes chosen as Hairer, Norsett and Wanner's
II.4) until it passes the time, and the value there is read off the step's quartic dense output. So the number of
steps is data-dependent and runs on the device, under `jit` and `vmap` too (a batch steps until its slowest example
is done; finished examples keep their state).

The gradient is a `custom_vjp`: the backward integrates the adjoint system
(y, a, a_t, a_args)' = (-f, -a df/dy, -a df/dt, -a df/dargs) backwards in time from one requested time to the one
before, adding each time's output cotangent on the way, as JAX does. It needs no stored steps, and it gives the
cotangents of y0, of t (every requested time) and of args; arrays `func` closes over get theirs through
`closure_convert`.

>>> def f(y, t, k):
...     return -k * y
>>> ys = tg.experimental.ode.odeint(f, tnp.ones(2), tnp.linspace(0.0, 1.0, 5), 0.5)   # exp(-0.5 t) at the times
>>> tg.grad(lambda k: odeint(f, tnp.ones(2), tnp.asarray([0.0, 1.0]), k)[-1].sum())(0.5)   # -2 exp(-0.5)
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tgfx.numpy as tnp
from tgfx.custom import custom_vjp
from tgfx.flatten_util import ravel_pytree
from tgfx.tensor import Tensor, to_tensor
from tgfx.transforms.grad import vjp
from tgfx.transforms.linear import closure_convert
from tgfx.transforms.vmap import vmap
from tgfx.tree import tree_flatten, tree_map

__all__ = ["odeint"]

# The Dormand-Prince 5(4) pair (Dormand and Prince 1980): the stages' times, their coefficients on the earlier
# stages, the 5th-order weights (also the last stage's row: first same as last), the 5th minus 4th-order weights,
# and the quartic dense output (Shampine 1986), P[j][i] the weight of stage j in theta ** (i + 1).
_C = (1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0)
_A = ((1 / 5,),
      (3 / 40, 9 / 40),
      (44 / 45, -56 / 15, 32 / 9),
      (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
      (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656))
_B = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84)
_E = (-71 / 57600, 0.0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40)
_P = ((1.0, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432),
      (0.0, 0.0, 0.0, 0.0),
      (0.0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799),
      (0.0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072),
      (0.0, 127303824393 / 49829197408, -318862633887 / 49829197408, 701980252875 / 199316789632),
      (0.0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844),
      (0.0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423))
_SAFETY, _GROW, _SHRINK, _ORDER = 0.9, 10.0, 0.2, 5.0


def _combine(weights: Sequence[float], ks: Sequence[Tensor]) -> Tensor:
    """sum_j weights[j] * ks[j], skipping the zero weights."""
    terms = [w * k for w, k in zip(weights, ks, strict=False) if w != 0.0]
    out = terms[0]
    for term in terms[1:]:
        out = out + term
    return out


def _rms(x: Tensor) -> Tensor:
    return tnp.sqrt(tnp.mean(x * x))


def _rk_step(f: Callable, y: Tensor, f0: Tensor, t: Tensor, dt: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One Dormand-Prince step from (t, y) with f0 = f(y, t): (y1, f(y1, t + dt), its error estimate, the dense
    output's coefficients (5, n), highest power first, y0 last)."""
    ks = [f0]
    for c, row in zip(_C, _A, strict=True):
        ks.append(f(y + dt * _combine(row, ks), t + c * dt))
    y1 = y + dt * _combine(_B, ks)
    ks.append(f(y1, t + dt))
    error = dt * _combine(_E, ks)
    powers = [dt * _combine([p[i] for p in _P], ks) for i in range(4)]
    return y1, ks[-1], error, tnp.stack(powers[::-1] + [y])


def _error_ratio(error: Tensor, y0: Tensor, y1: Tensor, rtol: float, atol: float) -> Tensor:
    """The step's error over its tolerance, root mean square over the state: the step is kept when it is <= 1."""
    return _rms(error / (atol + rtol * tnp.maximum(tnp.abs(y0), tnp.abs(y1))))


def _next_step(dt: Tensor, ratio: Tensor, hmax: float) -> Tensor:
    """The next step size: dt scaled by 0.9 ratio^(-1/5), by at most x10 and at least x0.2, never shrunk after a
    kept step, x10 for an exact step, at most hmax."""
    shrink = tnp.where(ratio < 1.0, 1.0, _SHRINK)
    factor = tnp.minimum(_GROW, tnp.maximum(_SAFETY * ratio ** (-1.0 / _ORDER), shrink))
    factor = tnp.where(ratio == 0.0, _GROW, factor)
    return tnp.clip(dt * factor, 0.0, hmax)


def _first_step(f: Callable, t0: Tensor, y0: Tensor, f0: Tensor, rtol: float, atol: float, hmax: float) -> Tensor:
    """The first step size, Hairer, Norsett and Wanner's II.4 starting step for an order-4 estimate."""
    scale = atol + tnp.abs(y0) * rtol
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
    h0 = tnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = f(y0 + h0 * f0, t0 + h0)
    d2 = _rms((f1 - f0) / scale) / h0
    h1 = tnp.where((d1 <= 1e-15) & (d2 <= 1e-15), tnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / tnp.maximum(d1, d2)) ** (1.0 / 5.0))
    return tnp.clip(tnp.minimum(100.0 * h0, h1), 0.0, hmax)


def _solve(func: Callable, rtol: float, atol: float, mxstep: float, hmax: float, y0: Tensor, ts: Tensor,
           *args: Any) -> Tensor:
    """The states (len(ts), n) of the flat system func(y, t, *args) at the times ts, from y0 at ts[0]."""
    from tgfx import lax

    def f(y: Tensor, t: Tensor) -> Tensor:
        return func(y, t, *args)

    def to_time(carry: tuple, target: Tensor) -> tuple[tuple, Tensor]:
        def going(state: tuple) -> Tensor:
            i, _, _, t, dt, _, _ = state
            more = (t < target) & (dt > 0.0)
            return more if math.isinf(mxstep) else more & (i < mxstep)

        def step(state: tuple) -> tuple:
            i, y, fy, t, dt, last_t, coeffs = state
            y1, f1, error, coeffs1 = _rk_step(f, y, fy, t, dt)
            ratio = _error_ratio(error, y, y1, rtol, atol)
            keep = ratio <= 1.0
            dt1 = _next_step(dt, ratio, hmax)
            return (i + 1, tnp.where(keep, y1, y), tnp.where(keep, f1, fy), tnp.where(keep, t + dt, t), dt1,
                    tnp.where(keep, t, last_t), tnp.where(keep, coeffs1, coeffs))

        _, *rest = lax.while_loop(going, step, (tnp.asarray(0, dtype=tnp.int32), *carry))
        _, _, t, _, last_t, coeffs = rest
        theta = ((target - last_t) / (t - last_t)).astype(coeffs.dtype)
        value = coeffs[0]
        for c in coeffs[1:]:
            value = value * theta + c
        return tuple(rest), value

    t0 = ts[0]
    f0 = f(y0, t0)
    dt = _first_step(f, t0, y0, f0, rtol, atol, hmax)
    coeffs = tnp.stack([tnp.zeros_like(y0)] * 4 + [y0])
    _, ys = lax.scan(to_time, (y0, f0, t0, dt, t0, coeffs), ts[1:])
    return tnp.concatenate([y0[None], ys])


def _solve_fwd(func: Callable, rtol: float, atol: float, mxstep: float, hmax: float, y0: Tensor, ts: Tensor,
               *args: Any) -> tuple[Tensor, tuple]:
    ys = _solve(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _solve_bwd(func: Callable, rtol: float, atol: float, mxstep: float, hmax: float, res: tuple,
               g: Tensor) -> tuple:
    """The adjoint method: from the last time back to the first, integrate the adjoint system backwards (in the
    negated time s = -t, so odeint runs forwards) and add each time's output cotangent to the state's."""
    from tgfx import lax
    ys, ts, args = res

    def adjoint(state: tuple, s: Tensor, *a: Any) -> tuple:
        y, y_bar, _, _ = state
        y_dot, pull = vjp(func, y, -s, *a)
        y_cot, t_cot, *a_cot = pull(y_bar)
        return -y_dot, y_cot, t_cot, tuple(a_cot)

    def back(carry: tuple, x: tuple) -> tuple[tuple, Tensor]:
        y_bar, t0_bar, args_bar = carry
        y_i, t_i, t_prev, g_i, g_prev = x
        t_bar = tnp.dot(func(y_i, t_i, *args), g_i)   # moving time i moves output i along f
        state = (y_i, y_bar, t0_bar - t_bar, args_bar)
        # adjoint reads func's closed-over arrays through func's own conversion (they are among args)
        _, y_bar, t0_bar, args_bar = _odeint(adjoint, state, tnp.stack([-t_i, -t_prev]), args, rtol, atol, mxstep,
                                             hmax, convert=False)
        y_bar, t0_bar, args_bar = tree_map(lambda v: v[1], (y_bar, t0_bar, args_bar))
        return (y_bar + g_prev, t0_bar, args_bar), t_bar

    init = (g[-1], tnp.zeros((), ts.dtype), tree_map(tnp.zeros_like, args))
    flip = lambda v: tnp.flip(v, 0)   # noqa: E731
    xs = (flip(ys[1:]), flip(ts[1:]), flip(ts[:-1]), flip(g[1:]), flip(g[:-1]))
    (y_bar, t0_bar, args_bar), ts_bar = lax.scan(back, init, xs)
    return (y_bar, tnp.concatenate([t0_bar[None], flip(ts_bar)]), *args_bar)


_solve_custom = custom_vjp(_solve, nondiff_argnums=(0, 1, 2, 3, 4))
_solve_custom.defvjp(_solve_fwd, _solve_bwd)


def _check_args(args: tuple) -> None:
    leaves, _ = tree_flatten(args)
    for leaf in leaves:
        if not isinstance(leaf, (Tensor, np.ndarray, np.generic, int, float, complex, bool)):
            raise TypeError(f"odeint: the *args passed on to func must be arrays or scalars (pytrees of them), got "
                            f"{leaf!r} of type {type(leaf).__name__}; close over other values in func instead")


def odeint(func: Callable, y0: Any, t: Any, *args: Any, rtol: float = 1.4e-8, atol: float = 1.4e-8,
           mxstep: float = math.inf, hmax: float = math.inf) -> Any:
    """Solve dy/dt = func(y, t, *args) from y(t[0]) = y0 and return y at each of the times `t`, as
    `jax.experimental.ode.odeint`: adaptive Dormand-Prince RK45 steps, each kept when its estimated error is
    within `atol + rtol * |y|` (root mean square over the state), at most `mxstep` steps between two times and
    none longer than `hmax`.

    `y0` is a pytree of arrays (func takes and returns that structure); `t` a 1-d array of increasing times; `args`
    arrays or pytrees of them, passed on to func. The result has y0's structure with a leading axis of len(t).
    Runs under `jit` and `vmap`; `grad` (reverse mode) uses the adjoint method and gives the gradient with respect
    to y0, t, args and the arrays func closes over. The tolerances' defaults suit float64; on float32 states the
    error stays near float32's resolution, as JAX's does.

    >>> def pendulum(y, t, b, c):
    ...     theta, omega = y
    ...     return tnp.stack([omega, -b * omega - c * tnp.sin(theta)])
    >>> ys = odeint(pendulum, tnp.asarray([3.0, 0.0]), tnp.linspace(0.0, 10.0, 101), 0.25, 5.0)   # (101, 2)
    """
    if not callable(func):
        raise TypeError(f"odeint: func must be a function (y, t, *args) -> dy/dt, got {type(func).__name__}")
    _check_args(args)
    ts = to_tensor(t)
    if ts.ndim != 1 or ts.shape[0] < 1:
        raise ValueError(f"odeint: t must be a 1-d array of the times to return y at (the first is y0's), got shape "
                         f"{ts.shape}")
    if not tnp.issubdtype(ts.dtype, tnp.floating):
        ts = ts.astype(tnp.float32)
    args = tree_map(lambda a: a if isinstance(a, Tensor) else to_tensor(a), args)
    return _odeint(func, y0, ts, args, rtol, atol, mxstep, hmax, convert=True)


def _odeint(func: Callable, y0: Any, ts: Tensor, args: tuple, rtol: float, atol: float, mxstep: float, hmax: float,
            *, convert: bool) -> Any:
    """odeint on the flat state, with func's closed-over traced arrays (`convert`) passed as extra args."""
    flat_y0, unravel = ravel_pytree(y0)
    if not tnp.issubdtype(flat_y0.dtype, tnp.inexact):
        raise TypeError(f"odeint: y0 must hold floating-point arrays, got dtype {flat_y0.dtype}")
    converted, consts = closure_convert(func, y0, ts[0], *args) if convert else (func, [])

    def flat_func(y: Tensor, tt: Tensor, *a: Any) -> Tensor:
        dy = ravel_pytree(converted(unravel(y), tt, *a))[0]
        if dy.shape != y.shape:
            raise ValueError(f"odeint: func must return dy/dt with y's structure and shapes ({y.shape[0]} values in "
                             f"all), got {dy.shape[0] if dy.ndim == 1 else dy.shape}")
        return dy.astype(y.dtype)

    ys = _solve_custom(flat_func, rtol, atol, mxstep, hmax, flat_y0, ts, *args, *consts)
    return vmap(unravel)(ys)
