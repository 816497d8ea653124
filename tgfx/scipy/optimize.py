"""`tgfx.scipy.optimize`: `minimize` by BFGS and the strong-Wolfe `line_search` under it, as `jax.scipy.optimize`.

The whole minimisation is one device loop (`tg.lax.while_loop`): each BFGS step searches along p = -H g for a step
length meeting the strong Wolfe conditions (Nocedal and Wright, "Numerical Optimization", algorithm 3.5: lengths
1, 2, 4, ... until one is acceptable or brackets one; then algorithm 3.6, "zoom", which narrows the bracket by
cubic, quadratic or bisection steps), then updates the inverse Hessian estimate H (algorithm 6.1). Gradients come
from `tg.value_and_grad` of the objective. The constants and the order of the tests are JAX's, so the iterates are
the same up to rounding: c1 = 1e-4, c2 = 0.9, the first trial length min(1, 2.02 (f_k - f_{k-1}) / (g p)), zoom
giving up after 30 steps or once its bracket is narrower than 1e-5 (1e-10 in float64).

>>> res = tsp.optimize.minimize(loss, x0, args=(data,), method="BFGS")
>>> res.x, res.fun, res.success, res.nit

`res.status`: 0 converged (|g|_inf < gtol), 1 the iteration limit, 3 zoom failed, 5 the line search's iteration
limit (2 + the line search's status), -1 anything else. Unlike scipy, `tol` is gtol when given (JAX ignores it).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.lax import while_loop
from tgfx.tensor import ArrayLike, Tensor, to_tensor
from tgfx.transforms.grad import value_and_grad


class OptimizeResults(NamedTuple):
    """What `minimize` found: x, whether it converged without a failed line search (success), the status code,
    f(x) (fun), its gradient (jac), the inverse Hessian estimate (hess_inv), the objective and gradient evaluations
    (nfev, njev) and the BFGS iterations (nit)."""
    x: Tensor
    success: Tensor
    status: Tensor
    fun: Tensor
    jac: Tensor
    hess_inv: Tensor | None
    nfev: Tensor
    njev: Tensor
    nit: Tensor


class LineSearchResults(NamedTuple):
    """What `line_search` found: failed (no length meeting the strong Wolfe conditions), its iterations (nit, k),
    evaluations (nfev, ngev), the step length a_k, f and its gradient there (f_k, g_k), status (0 found, 1 zoom
    failed, 3 the iteration limit)."""
    failed: Tensor
    nit: Tensor
    nfev: Tensor
    ngev: Tensor
    k: Tensor
    a_k: Tensor
    f_k: Tensor
    g_k: Tensor
    status: Tensor


State = dict[str, Tensor]


def _chosen(pick: Tensor, new: State, old: State) -> State:
    """old with the entries of `new` where `pick` (a boolean scalar) holds."""
    return {**old, **{k: tnp.where(pick, v, old[k]) for k, v in new.items()}}


def _cubicmin(a: Tensor, fa: Tensor, fpa: Tensor, b: Tensor, fb: Tensor, c: Tensor, fc: Tensor) -> Tensor:
    """The minimiser of the cubic through (a, fa) with slope fpa there, (b, fb) and (c, fc) (NaN when it has none)."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    rb, rc = fb - fa - fpa * db, fc - fa - fpa * dc
    ca = (dc ** 2 * rb - db ** 2 * rc) / denom
    cb = (-dc ** 3 * rb + db ** 3 * rc) / denom
    return a + (-cb + tnp.sqrt(cb * cb - 3.0 * ca * fpa)) / (3.0 * ca)


def _quadmin(a: Tensor, fa: Tensor, fpa: Tensor, b: Tensor, fb: Tensor) -> Tensor:
    """The minimiser of the parabola through (a, fa) with slope fpa there and (b, fb)."""
    db = b - a
    return a - fpa / (2.0 * ((fb - fa - fpa * db) / db ** 2))


def _zoom(phi: Callable, wolfe_one: Callable, wolfe_two: Callable, lo: State, hi: State, g0: Tensor,
          skip: Tensor) -> State:
    """Algorithm 3.6: a length meeting the strong Wolfe conditions inside the bracket [lo, hi] (each a dict of
    a, phi, dphi), narrowed a step at a time; `skip` (a boolean scalar) runs no step. The result's a_star, phi_star,
    dphi_star, g_star, failed and its evaluation counts."""
    real = lo["a"].dtype
    state = {"done": tnp.asarray(False), "failed": tnp.asarray(False), "j": tnp.asarray(0, dtype=dtypes.int32),
             "a_lo": lo["a"], "phi_lo": lo["phi"], "dphi_lo": lo["dphi"],
             "a_hi": hi["a"], "phi_hi": hi["phi"], "dphi_hi": hi["dphi"],
             "a_rec": (lo["a"] + hi["a"]) / 2.0, "phi_rec": (lo["phi"] + hi["phi"]) / 2.0,
             "a_star": tnp.asarray(1.0, dtype=real), "phi_star": lo["phi"], "dphi_star": lo["dphi"], "g_star": g0,
             "nfev": tnp.asarray(0, dtype=dtypes.int32)}
    threshold = 1e-10 if real == dtypes.float64 else 1e-5

    def body(s: State) -> State:
        width = s["a_hi"] - s["a_lo"]
        a, b = tnp.minimum(s["a_hi"], s["a_lo"]), tnp.maximum(s["a_hi"], s["a_lo"])
        s = {**s, "failed": s["failed"] | (width <= threshold)}
        cubic = _cubicmin(s["a_lo"], s["phi_lo"], s["dphi_lo"], s["a_hi"], s["phi_hi"], s["a_rec"], s["phi_rec"])
        use_cubic = (s["j"] > 0) & (cubic > a + 0.2 * width) & (cubic < b - 0.2 * width)
        quad = _quadmin(s["a_lo"], s["phi_lo"], s["dphi_lo"], s["a_hi"], s["phi_hi"])
        use_quad = ~use_cubic & (quad > a + 0.1 * width) & (quad < b - 0.1 * width)
        a_j = tnp.where(use_cubic, cubic, tnp.where(use_quad, quad, (s["a_lo"] + s["a_hi"]) / 2.0))
        phi_j, dphi_j, g_j = phi(a_j)
        s = {**s, "nfev": s["nfev"] + 1}
        to_hi = wolfe_one(a_j, phi_j) | (phi_j >= s["phi_lo"])
        found = wolfe_two(dphi_j) & ~to_hi
        flip = (dphi_j * (s["a_hi"] - s["a_lo"]) >= 0.0) & ~to_hi & ~found
        to_lo = ~to_hi & ~found
        s = _chosen(to_hi, {"a_hi": a_j, "phi_hi": phi_j, "dphi_hi": dphi_j, "a_rec": s["a_hi"],
                            "phi_rec": s["phi_hi"]}, s)
        s = _chosen(found, {"a_star": a_j, "phi_star": phi_j, "dphi_star": dphi_j, "g_star": g_j}, s)
        s = {**s, "done": s["done"] | found}
        s = _chosen(flip, {"a_hi": s["a_lo"], "phi_hi": s["phi_lo"], "dphi_hi": s["dphi_lo"], "a_rec": s["a_hi"],
                           "phi_rec": s["phi_hi"]}, s)
        s = _chosen(to_lo & ~flip, {"a_rec": s["a_lo"], "phi_rec": s["phi_lo"]}, s)
        s = _chosen(to_lo, {"a_lo": a_j, "phi_lo": phi_j, "dphi_lo": dphi_j}, s)
        j = s["j"] + 1
        return {**s, "j": j, "failed": s["failed"] | (j >= 30)}

    return while_loop(lambda s: ~s["done"] & ~skip & ~s["failed"], body, state)


def line_search(f: Callable, xk: ArrayLike, pk: ArrayLike, old_fval: ArrayLike | None = None,
                old_old_fval: ArrayLike | None = None, gfk: ArrayLike | None = None, c1: float = 1e-4,
                c2: float = 0.9, maxiter: int = 20) -> LineSearchResults:
    """A step length a along the descent direction pk from xk meeting the strong Wolfe conditions
    f(xk + a pk) <= f(xk) + c1 a g.pk and |g(xk + a pk).pk| <= c2 |g.pk| (`jax.scipy.optimize.line_search`).
    old_fval and gfk, f and its gradient at xk, save an evaluation; old_old_fval, f at the previous iterate, sets
    the first trial length."""
    xk, pk = to_tensor(xk), to_tensor(pk)
    real = tnp.result_type(xk, pk, tnp.float32)
    xk, pk = xk.astype(real), pk.astype(real)
    fg = value_and_grad(f)

    def phi(t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        value, g = fg(xk + t * pk)
        return value.astype(real), tnp.real(tnp.dot(g, pk)).astype(real), g.astype(real)

    evaluated = old_fval is None or gfk is None
    if evaluated:
        phi0, dphi0, g0 = phi(tnp.asarray(0.0, dtype=real))
    else:
        phi0, g0 = to_tensor(old_fval).astype(real), to_tensor(gfk).astype(real)
        dphi0 = tnp.real(tnp.dot(g0, pk)).astype(real)
    if old_old_fval is not None:
        candidate = 1.01 * 2 * (phi0 - to_tensor(old_old_fval).astype(real)) / dphi0
        start = tnp.where(candidate > 1, 1.0, candidate).astype(real)
    else:
        start = tnp.asarray(1.0, dtype=real)

    def wolfe_one(a: Tensor, phi_a: Tensor) -> Tensor:
        return phi_a > phi0 + c1 * a * dphi0

    def wolfe_two(dphi_a: Tensor) -> Tensor:
        return tnp.abs(dphi_a) <= -c2 * dphi0

    int32 = dtypes.int32
    state = {"done": tnp.asarray(False), "failed": tnp.asarray(False), "i": tnp.asarray(1, dtype=int32),
             "a_prev": tnp.asarray(0.0, dtype=real), "phi_prev": phi0, "dphi_prev": dphi0,
             "nfev": tnp.asarray(int(evaluated), dtype=int32),
             "a_star": tnp.asarray(0.0, dtype=real), "phi_star": phi0, "dphi_star": dphi0, "g_star": g0}

    def body(s: State) -> State:
        a_i = tnp.where(s["i"] == 1, start, s["a_prev"] * 2.0)
        phi_i, dphi_i, g_i = phi(a_i)
        zoom_left = wolfe_one(a_i, phi_i) | ((phi_i >= s["phi_prev"]) & (s["i"] > 1))   # the bracket [prev, a_i]
        found = wolfe_two(dphi_i) & ~zoom_left
        zoom_right = (dphi_i >= 0.0) & ~zoom_left & ~found                               # the bracket [a_i, prev]
        prev = {"a": s["a_prev"], "phi": s["phi_prev"], "dphi": s["dphi_prev"]}
        here = {"a": a_i, "phi": phi_i, "dphi": dphi_i}
        z1 = _zoom(phi, wolfe_one, wolfe_two, prev, here, g0, ~zoom_left)
        z2 = _zoom(phi, wolfe_one, wolfe_two, here, prev, g0, ~zoom_right)
        s = {**s, "nfev": s["nfev"] + 1 + z1["nfev"] + z2["nfev"]}
        star = ("a_star", "phi_star", "dphi_star", "g_star")
        s = _chosen(zoom_left, {k: z1[k] for k in star}, s)
        s = _chosen(found, {"a_star": a_i, "phi_star": phi_i, "dphi_star": dphi_i, "g_star": g_i}, s)
        s = _chosen(zoom_right, {k: z2[k] for k in star}, s)
        return {**s, "done": s["done"] | zoom_left | found | zoom_right,
                "failed": s["failed"] | (zoom_left & z1["failed"]) | (zoom_right & z2["failed"]),
                "i": s["i"] + 1, "a_prev": a_i, "phi_prev": phi_i, "dphi_prev": dphi_i}

    s = while_loop(lambda s: ~s["done"] & (s["i"] <= maxiter) & ~s["failed"], body, state)
    status = tnp.where(s["failed"], 1, tnp.where(s["i"] > maxiter, 3, 0)).astype(int32)
    a_k = s["a_star"]
    if real != dtypes.float64:   # a vanishing step in single precision is kept at 1e-8 (as JAX does)
        a_k = tnp.where(tnp.abs(a_k) < 1e-8, tnp.sign(a_k) * 1e-8, a_k)
    return LineSearchResults(failed=s["failed"] | ~s["done"], nit=s["i"] - 1, nfev=s["nfev"], ngev=s["nfev"],
                             k=s["i"], a_k=a_k, f_k=s["phi_star"], g_k=s["g_star"], status=status)


def _minimize_bfgs(fun: Callable, x0: Tensor, maxiter: int | None = None, norm: float = np.inf, gtol: float = 1e-5,
                   line_search_maxiter: int = 10) -> State:
    """Algorithm 6.1: x_{k+1} = x_k + a_k p_k, p_k = -H_k g_k with a_k from `line_search`, and
    H_{k+1} = (I - rho s y^T) H_k (I - rho y s^T) + rho s s^T (s = a_k p_k, y = g_{k+1} - g_k, rho = 1 / y.s; H kept
    when rho is not finite), until |g|_norm < gtol, a line search fails, or maxiter (200 n by default) steps."""
    n = x0.shape[0]
    maxiter = 200 * n if maxiter is None else int(maxiter)
    f0, g0 = value_and_grad(fun)(x0)
    int32 = dtypes.int32
    eye = tnp.eye(n, dtype=x0.dtype)
    state = {"converged": tnp.linalg.norm(g0, ord=norm) < gtol, "failed": tnp.asarray(False),
             "k": tnp.asarray(0, dtype=int32),
             "nfev": tnp.asarray(1, dtype=int32), "ngev": tnp.asarray(1, dtype=int32), "x": x0,
             "f": f0.astype(x0.dtype), "g": g0, "H": eye, "f_prev": (f0 + tnp.linalg.norm(g0) / 2).astype(x0.dtype),
             "ls_status": tnp.asarray(0, dtype=int32)}

    def body(s: State) -> State:
        p = -(s["H"] @ s["g"])
        ls = line_search(fun, s["x"], p, old_fval=s["f"], old_old_fval=s["f_prev"], gfk=s["g"],
                         maxiter=line_search_maxiter)
        step = ls.a_k * p
        y = ls.g_k - s["g"]
        rho = 1.0 / tnp.dot(y, step)
        w = eye - rho * step[:, None] * y[None, :]
        h = w @ s["H"] @ w.T + rho * step[:, None] * step[None, :]
        return {"converged": tnp.linalg.norm(ls.g_k, ord=norm) < gtol, "failed": ls.failed, "k": s["k"] + 1,
                "nfev": s["nfev"] + ls.nfev, "ngev": s["ngev"] + ls.ngev, "x": s["x"] + step, "f": ls.f_k,
                "g": ls.g_k, "H": tnp.where(tnp.isfinite(rho), h, s["H"]), "f_prev": s["f"],
                "ls_status": ls.status}

    s = while_loop(lambda s: ~s["converged"] & ~s["failed"] & (s["k"] < maxiter), body, state)
    status = tnp.where(s["converged"], 0, tnp.where(s["k"] == maxiter, 1,
                                                    tnp.where(s["failed"], 2 + s["ls_status"], -1)))
    return {**s, "status": status.astype(int32)}


_OPTIONS = ("maxiter", "norm", "gtol", "line_search_maxiter")


def minimize(fun: Callable, x0: ArrayLike, args: tuple = (), *, method: str, tol: float | None = None,
             options: Mapping[str, Any] | None = None) -> OptimizeResults:
    """The minimiser of fun(x, *args) from x0, a 1-d array of n reals (`jax.scipy.optimize.minimize`); `method` must
    be "BFGS". `options`: maxiter (200 n), gtol (1e-5: stop when |grad|_norm < gtol), norm (inf) and
    line_search_maxiter (10); `tol`, when given, is gtol. Runs on the device as one loop, under `jit` too.

    Raises TypeError when args is not a tuple, ValueError for another method, an unknown option, or an x0 that is
    not 1-d."""
    if not isinstance(args, tuple):
        raise TypeError(f"minimize: args must be a tuple of the extra arguments of fun, got {type(args).__name__}")
    if not isinstance(method, str) or method.lower() != "bfgs":
        raise ValueError(f"minimize: method {method!r} is not supported; use method='BFGS'")
    options = dict(options or {})
    if unknown := sorted(set(options) - set(_OPTIONS)):
        raise ValueError(f"minimize: unknown options {unknown}; BFGS takes {list(_OPTIONS)}")
    if tol is not None:
        options.setdefault("gtol", tol)
    x = to_tensor(x0)
    if x.ndim != 1:
        raise ValueError(f"minimize: x0 must be a 1-d array of the variables, got shape {x.shape}; flatten it and "
                         f"reshape inside fun")
    if not x.dtype.is_float:
        x = x.astype(tnp.result_type(x, tnp.float32))
    s = _minimize_bfgs(lambda v: fun(v, *args), x, **options)
    return OptimizeResults(x=s["x"], success=s["converged"] & ~s["failed"], status=s["status"], fun=s["f"],
                           jac=s["g"], hess_inv=s["H"], nfev=s["nfev"], njev=s["ngev"], nit=s["k"])


__all__ = ["LineSearchResults", "OptimizeResults", "line_search", "minimize"]
