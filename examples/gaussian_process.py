"""Gaussian process regression with fitted kernel hyperparameters, as JAX's examples/gaussian_process_regression.py.

    python examples/gaussian_process.py [--steps 300] [--points 32]

The data are noisy samples of sin(x) at random points in [0, 2 pi]. The model is a zero-mean GP (on the centred
targets) with a squared-exponential (RBF) kernel

    k(x, x') = amplitude^2 exp(-|x - x'|^2 / (2 lengthscale^2)),   y = f(x) + N(0, noise^2),

whose three hyperparameters are fitted, as their logarithms (so they stay positive), by minimising the negative log
marginal likelihood of the data with Adam (`tg.optim.adam`):

    -log p(y | X) = y^T K^-1 y / 2 + sum(log diag(L)) + n log(2 pi) / 2,   K = k(X, X) + noise^2 I = L L^T.

The Cholesky factor and the solves come from `tgfx.scipy.linalg` (`cholesky`, `cho_solve`, `solve_triangular`),
each a loop that compiles once with its own backward, so the training step, `tg.jit(tg.value_and_grad(nll))` plus
the Adam update, traces once and replays. The fitted GP then predicts the mean and variance of f on a grid.
"""
from __future__ import annotations

import argparse
import math
import time
from typing import Any, NamedTuple

import numpy as np

import tgfx as tg
import tgfx.numpy as tnp
import tgfx.scipy.linalg as sla

Params = dict[str, tg.Tensor]
JITTER = 1e-6  # added to K's diagonal so the factorisation stays stable when the fitted noise gets small


def rbf(params: Params, x: tg.Tensor, z: tg.Tensor) -> tg.Tensor:
    """The kernel matrix k(x_i, z_j) of x (n, d) and z (m, d): (n, m)."""
    amp2 = tnp.exp(2 * params["log_amplitude"])
    sq = ((x[:, None, :] - z[None, :, :]) ** 2).sum(axis=-1)
    return amp2 * tnp.exp(-0.5 * sq / tnp.exp(2 * params["log_lengthscale"]))


def train_cov_factor(params: Params, x: tg.Tensor) -> tg.Tensor:
    """L, the lower Cholesky factor of K = k(x, x) + (noise^2 + jitter) I."""
    n = x.shape[0]
    noise2 = tnp.exp(2 * params["log_noise"]) + JITTER
    return sla.cholesky(rbf(params, x, x) + noise2 * tnp.eye(n), lower=True)


def neg_log_marginal_likelihood(params: Params, x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    """-log p(y | x, params) of centred targets y (n,) at inputs x (n, d)."""
    n = x.shape[0]
    chol = train_cov_factor(params, x)
    alpha = sla.cho_solve((chol, True), y)  # K^-1 y
    log_det_half = tnp.log(tnp.einsum("ii->i", chol)).sum()  # log det(K) / 2, from L's diagonal
    return 0.5 * (y * alpha).sum() + log_det_half + 0.5 * n * math.log(2 * math.pi)


@tg.jit
def predict(params: Params, x: tg.Tensor, y: tg.Tensor, x_new: tg.Tensor) -> tuple[tg.Tensor, tg.Tensor]:
    """The posterior mean and variance of f at x_new (m, d), given centred targets y at x."""
    chol = train_cov_factor(params, x)
    cross = rbf(params, x, x_new)                                   # (n, m)
    mean = cross.T @ sla.cho_solve((chol, True), y)
    v = sla.solve_triangular(chol, cross, lower=True)               # L^-1 k(x, x_new)
    prior_var = tnp.exp(2 * params["log_amplitude"]) * tnp.ones(x_new.shape[0])   # k(x*, x*) of the RBF kernel
    return mean, prior_var - (v * v).sum(axis=0)


def make_step(opt: tg.optim.GradientTransformation) -> tg.jit:
    """The training step, jitted: the NLL and its gradient in the three log hyperparameters, then one `opt` step."""
    @tg.jit
    def train_step(params: Params, state: Any, x: tg.Tensor, y: tg.Tensor) -> tuple[Params, Any, tg.Tensor]:
        nll, grads = tg.value_and_grad(neg_log_marginal_likelihood)(params, x, y)
        updates, state = opt.update(grads, state, params)
        return tg.optim.apply_updates(params, updates), state, nll
    return train_step


def sample_data(n: int, seed: int, noise: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """n points x uniform in [0, 2 pi] (as an (n, 1) array) and y = sin(x) + N(0, noise^2)."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 2 * np.pi, n)).astype(np.float32)[:, None]
    y = (np.sin(x[:, 0]) + noise * rng.standard_normal(n)).astype(np.float32)
    return x, y


class Fit(NamedTuple):
    nll: list[float]             # the negative log marginal likelihood, every --log-every steps (first and last)
    trace_count: int             # how many times the jitted step was traced
    compiles_after_first: int    # kernels compiled after the first step (0: every later step replayed it)
    params: dict[str, float]     # the fitted amplitude, lengthscale and noise (not their logs)
    grid: np.ndarray             # where the posterior is evaluated, (m,)
    mean: np.ndarray             # its mean there
    var: np.ndarray              # its variance there
    truth: np.ndarray            # sin at the grid


def run(argv: list[str] | None = None) -> Fit:
    """Fit the hyperparameters and predict on a grid; prints progress. `main` returns the last NLL of this."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--points", type=int, default=32, help="training points")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=50)
    args = ap.parse_args(argv)

    x_np, y_np = sample_data(args.points, args.seed)
    y_mean = float(y_np.mean())
    x, y = tg.asarray(x_np), tg.asarray(y_np - y_mean)
    params = {name: tg.asarray(np.float32(0.0)) for name in ("log_amplitude", "log_lengthscale", "log_noise")}
    opt = tg.optim.adam(args.lr)
    state = opt.init(params)
    step = make_step(opt)
    print(f"GP regression on {args.points} noisy samples of sin(x); Adam, lr {args.lr}, {args.steps} steps")

    history: list[float] = []
    start = time.perf_counter()
    for i in range(args.steps):
        params, state, nll = step(params, state, x, y)
        if i == 0:
            print(f"first step (trace + compile): {(time.perf_counter() - start) * 1e3:.0f} ms")
            t1, compiles = time.perf_counter(), tg.counters.compile_count
        if i % args.log_every == 0 or i == args.steps - 1:
            history.append(nll.item())
            print(f"step {i + 1:5d}  negative log marginal likelihood {history[-1]:9.4f}", flush=True)
    per_step = (time.perf_counter() - t1) / max(1, args.steps - 1)
    later = tg.counters.compile_count - compiles
    fitted = {name[4:]: math.exp(p.item()) for name, p in params.items()}
    print(f"{per_step * 1e3:.2f} ms/step after the first; train step traced {step.trace_count} time(s), {later} "
          f"kernels compiled after the first step")
    print("fitted " + ", ".join(f"{k} {v:.3f}" for k, v in fitted.items()))

    grid = np.linspace(0, 2 * np.pi, 50, dtype=np.float32)
    mean, var = predict(params, x, y, tg.asarray(grid[:, None]))
    mean_np, var_np = mean.numpy() + y_mean, var.numpy()
    truth = np.sin(grid)
    print(f"posterior mean on {len(grid)} grid points: max |mean - sin| {np.abs(mean_np - truth).max():.3f}, "
          f"mean posterior std {np.sqrt(np.maximum(var_np, 0)).mean():.3f}")
    return Fit(history, step.trace_count, later, fitted, grid, mean_np, var_np, truth)


def main(argv: list[str] | None = None) -> float:
    """Fit and predict (see `run`); returns the final negative log marginal likelihood."""
    return run(argv).nll[-1]


if __name__ == "__main__":
    main()
