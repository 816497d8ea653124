"""JAX's remaining examples (advi, control, kernel_lsq, gaussian_process_regression, mnist_classifier_fromscratch) and
the code of its tutorials that train or transform something, ported by spelling: the imports below are the only
change a tgfx user makes (`import jax` -> `import tgfx as jax`); each `run_*` is JAX's code, small, with synthetic
numpy data in place of downloads and no plotting. `JAX` holds what the same functions give under jax 0.10.2 (CPU),
run with these imports spelled back (`import jax`, `import jax.numpy as jnp`, ...), recorded to 7 digits.

What failed before: control.py reads `spec.Q[T + 1]` of T + 1 entries (jax clamps a static int read; tgfx raised
IndexError, c64e83f); kernel_lsq's and advi's `update(i, opt_state)` took jit's general path each step (2667dbf)."""
from __future__ import annotations

import collections
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import pytest

import tgfx as jax
import tgfx.numpy as jnp
import tgfx.scipy as jsp
import tgfx.scipy.stats.norm as norm
from tgfx import lax, random
from tgfx.example_libraries import optimizers
from tgfx.scipy.special import logsumexp

grad, jit, vmap, vjp, jvp = jax.grad, jax.jit, jax.vmap, jax.vjp, jax.jvp


def _f(x: Any) -> list[float]:
    return np.asarray(x, np.float64).ravel().tolist()


def _check(x: Any) -> dict[str, float]:
    """A weighted sum of every element (position-sensitive: it moves with any element) and the sum of their
    magnitudes, the scale its float32 rounding is measured against."""
    a = np.asarray(x, np.float64).ravel()
    return {"check": float(np.sum(a * np.cos(np.arange(a.size)))), "scale": float(np.sum(np.abs(a)))}


# ---- examples/advi.py: ADVI on the funnel density, momentum on a batch ELBO through vmap ----
def run_advi() -> dict[str, Any]:
    def diag_gaussian_sample(rng, mean, log_std):
        return mean + jnp.exp(log_std) * random.normal(rng, mean.shape)

    def diag_gaussian_logpdf(x, mean, log_std):
        return jnp.sum(vmap(norm.logpdf)(x, mean, jnp.exp(log_std)))

    def elbo(logprob, rng, mean, log_std):
        sample = diag_gaussian_sample(rng, mean, log_std)
        return logprob(sample) - diag_gaussian_logpdf(sample, mean, log_std)

    def batch_elbo(logprob, rng, params, num_samples):
        rngs = random.split(rng, num_samples)
        vectorized_elbo = vmap(partial(elbo, logprob), in_axes=(0, None, None))
        return jnp.mean(vectorized_elbo(rngs, *params))

    @partial(jit, static_argnums=(0, 1, 2, 4))
    def _mesh_eval(func, x_limits, y_limits, params, num_ticks):
        x = jnp.linspace(*x_limits, num=num_ticks)
        y = jnp.linspace(*y_limits, num=num_ticks)
        X, Y = jnp.meshgrid(x, y)
        xy_vec = jnp.stack([X.ravel(), Y.ravel()]).T
        zs = vmap(func, in_axes=(0, None))(xy_vec, params)
        return X, Y, zs.reshape(X.shape)

    def funnel_log_density(params):
        return norm.logpdf(params[0], 0, jnp.exp(params[1])) + norm.logpdf(params[1], 0, 1.35)

    @jit
    def objective(params, t):
        rng = random.key(t)
        return -batch_elbo(funnel_log_density, rng, params, 40)

    opt_init, opt_update, get_params = optimizers.momentum(step_size=0.1, mass=0.9)
    opt_state = opt_init((jnp.zeros(2), jnp.zeros(2)))

    @jit
    def update(i, opt_state):
        params = get_params(opt_state)
        gradient = grad(objective)(params, i)
        return opt_update(i, gradient, opt_state)

    bounds = []
    for t in range(6):
        opt_state = update(t, opt_state)
        bounds.append(float(objective(get_params(opt_state), t)))
    params = get_params(opt_state)
    approx_dist = lambda x, params: jnp.exp(diag_gaussian_logpdf(x, *params))   # noqa: E731 -- as JAX wrote it
    _, _, Z = _mesh_eval(approx_dist, (-2, 2), (-4, 2), params, 21)
    samples = vmap(diag_gaussian_sample, in_axes=(0, None, None))(random.split(random.key(11), 40), *params)
    return {"bounds": bounds, "params": _f(params), "Z": _check(Z), "samples": _check(samples)}


# ---- examples/control.py (removed from JAX in 2024; its last version): trajectories, LQR, iLQR, MPC ----
ControlSpec = collections.namedtuple('ControlSpec', 'cost dynamics horizon state_dim control_dim')
LqrSpec = collections.namedtuple('LqrSpec', 'Q q R r M A B')
dot, mm = jnp.dot, jnp.matmul


def mv(mat, vec):
    assert mat.ndim == 2
    assert vec.ndim == 1
    return dot(mat, vec)


def trajectory(dynamics, U, x0):
    T, _ = U.shape
    d, = x0.shape
    X = jnp.zeros((T + 1, d), dtype=x0.dtype)
    X = X.at[0].set(x0)

    def loop(t, X):
        x = dynamics(t, X[t], U[t])
        X = X.at[t + 1].set(x)
        return X
    return lax.fori_loop(0, T, loop, X)


def make_lqr_approx(p):
    T = p.horizon

    def approx_timestep(t, x, u):
        M = jax.jacfwd(grad(p.cost, argnums=2), argnums=1)(t, x, u).T
        Q = jax.jacfwd(grad(p.cost, argnums=1), argnums=1)(t, x, u)
        R = jax.jacfwd(grad(p.cost, argnums=2), argnums=2)(t, x, u)
        q, r = grad(p.cost, argnums=(1, 2))(t, x, u)
        A, B = jax.jacobian(p.dynamics, argnums=(1, 2))(t, x, u)
        return Q, q, R, r, M, A, B
    _approx = vmap(approx_timestep)

    def approx(X, U):
        assert X.shape[0] == T + 1 and U.shape[0] == T
        U_pad = jnp.vstack((U, jnp.zeros((1,) + U.shape[1:])))
        Q, q, R, r, M, A, B = _approx(jnp.arange(T + 1), X, U_pad)
        return LqrSpec(Q, q, R[:T], r[:T], M[:T], A[:T], B[:T])
    return approx


def lqr_solve(spec):
    EPS = 1e-7
    T, control_dim, _ = spec.R.shape
    _, state_dim, _ = spec.Q.shape
    K = jnp.zeros((T, control_dim, state_dim))
    k = jnp.zeros((T, control_dim))

    def rev_loop(t_, state):
        t = T - t_ - 1
        spec, P, p, K, k = state
        Q, q = spec.Q[t], spec.q[t]
        R, r = spec.R[t], spec.r[t]
        M = spec.M[t]
        A, B = spec.A[t], spec.B[t]
        AtP = mm(A.T, P)
        BtP = mm(B.T, P)
        G = R + mm(BtP, B)
        H = mm(BtP, A) + M.T
        h = r + mv(B.T, p)
        K_ = -jnp.linalg.solve(G + EPS * jnp.eye(G.shape[0]), H)
        k_ = -jnp.linalg.solve(G + EPS * jnp.eye(G.shape[0]), h)
        P_ = Q + mm(AtP, A) + mm(K_.T, H)
        p_ = q + mv(A.T, p) + mv(K_.T, h)
        K = K.at[t].set(K_)
        k = k.at[t].set(k_)
        return spec, P_, p_, K, k
    # (spec.Q[T + 1]: one past the end of Q's T + 1 entries, which JAX reads as Q[T])
    _, P, p, K, k = lax.fori_loop(0, T, rev_loop, (spec, spec.Q[T + 1], spec.q[T + 1], K, k))
    return K, k


def lqr_predict(spec, x0):
    T, control_dim, _ = spec.R.shape
    _, state_dim, _ = spec.Q.shape
    K, k = lqr_solve(spec)

    def fwd_loop(t, state):
        spec, X, U = state
        A, B = spec.A[t], spec.B[t]
        u = mv(K[t], X[t]) + k[t]
        x = mv(A, X[t]) + mv(B, u)
        X = X.at[t + 1].set(x)
        U = U.at[t].set(u)
        return spec, X, U
    U = jnp.zeros((T, control_dim))
    X = jnp.zeros((T + 1, state_dim))
    X = X.at[0].set(x0)
    _, X, U = lax.fori_loop(0, T, fwd_loop, (spec, X, U))
    return X, U


def ilqr(iterations, p, x0, U):
    assert x0.ndim == 1 and x0.shape[0] == p.state_dim, x0.shape
    assert U.ndim > 0 and U.shape[0] == p.horizon, (U.shape, p.horizon)
    lqr_approx = make_lqr_approx(p)

    def loop(_, state):
        X, U = state
        p_lqr = lqr_approx(X, U)
        dX, dU = lqr_predict(p_lqr, jnp.zeros_like(x0))
        U = U + dU
        X = trajectory(p.dynamics, U, X[0] + dX[0])
        return X, U
    X = trajectory(p.dynamics, U, x0)
    return lax.fori_loop(0, iterations, loop, (X, U))


def mpc_predict(solver, p, x0, U):
    assert x0.ndim == 1 and x0.shape[0] == p.state_dim
    T = p.horizon

    def zero_padded_controls_window(U, t):
        U_pad = jnp.vstack((U, jnp.zeros(U.shape)))
        return lax.dynamic_slice_in_dim(U_pad, t, T, axis=0)

    def loop(t, state):
        cost = lambda t_, x, u: p.cost(t + t_, x, u)        # noqa: E731 -- as JAX wrote it
        dyns = lambda t_, x, u: p.dynamics(t + t_, x, u)    # noqa: E731
        X, U = state
        p_ = ControlSpec(cost, dyns, T, p.state_dim, p.control_dim)
        xt = X[t]
        U_rem = zero_padded_controls_window(U, t)
        _, U_ = solver(p_, xt, U_rem)
        ut = U_[0]
        x = p.dynamics(t, xt, ut)
        X = X.at[t + 1].set(x)
        U = U.at[t].set(ut)
        return X, U
    X = jnp.zeros((T + 1, p.state_dim))
    X = X.at[0].set(x0)
    return lax.fori_loop(0, T, loop, (X, U))


def one_step_lqr(dim, T):
    Q = jnp.stack(T * (jnp.eye(dim),))
    q = jnp.zeros((T, dim))
    R = jnp.zeros((T, dim, dim))
    r = jnp.zeros((T, dim))
    M = jnp.zeros((T, dim, dim))
    A = jnp.stack(T * (jnp.eye(dim),))
    B = jnp.stack(T * (jnp.eye(dim),))
    return LqrSpec(Q, q, R, r, M, A, B)


def control_from_lqr(lqr):
    T, dim, _ = lqr.Q.shape

    def cost(t, x, u):
        return (dot(dot(lqr.Q[t], x), x) + dot(lqr.q[t], x) + dot(dot(lqr.R[t], u), u) + dot(lqr.r[t], u) +
                dot(dot(lqr.M[t], u), x))

    def dynamics(t, x, u):
        return dot(lqr.A[t], x) + dot(lqr.B[t], u)
    return ControlSpec(cost, dynamics, T, dim, dim)


def run_control() -> dict[str, Any]:
    x0 = jnp.array([0.3, -0.7])
    p = one_step_lqr(2, 10)
    K, k = jit(lqr_solve)(p)
    X, U = jit(lqr_predict)(p, x0)
    counter = trajectory(lambda t, x, u: (x + u) % 3, jnp.ones((10, 1)), jnp.zeros(1))

    def cost(t, x, u):
        return (x[0] ** 2. + 1e-3 * u[0] ** 2.) / (t + 1).astype(x.dtype)

    def dynamics(t, x, u):
        return (x ** 2. - u ** 2.) / (t + 1).astype(x.dtype)
    nonlinear = ControlSpec(cost, dynamics, 6, 1, 1)
    Xn, Un = jit(lambda x0, U: ilqr(4, nonlinear, x0, U))(jnp.array([0.2]), 1e-5 * jnp.ones((6, 1)))
    Xm, Um = jit(lambda x0, U: mpc_predict(partial(ilqr, 2), control_from_lqr(one_step_lqr(2, 4)), x0, U))(
        x0, jnp.zeros((4, 2)))
    return {"K": _f(K), "k": _f(k), "X": _f(X), "U": _f(U), "counter": _f(counter), "Xn": _f(Xn), "Un": _f(Un),
            "Xm": _f(Xm), "Um": _f(Um)}


# ---- examples/kernel_lsq.py (removed from JAX in 2024): kernel least squares by momentum, Gram matrices by vmap ----
def run_kernel_lsq() -> dict[str, Any]:
    def gram(kernel, xs):
        return vmap(lambda x: vmap(lambda y: kernel(x, y))(xs))(xs)

    def minimize(f, x, num_steps=300, step_size=0.0001, mass=0.9):
        opt_init, opt_update, get_params = optimizers.momentum(step_size, mass)

        @jit
        def update(i, opt_state):
            x = get_params(opt_state)
            return opt_update(i, grad(f)(x), opt_state)
        opt_state = opt_init(x)
        for i in range(num_steps):
            opt_state = update(i, opt_state)
        return get_params(opt_state)

    def train(kernel, xs, ys, regularization=0.01):
        gram_ = jit(partial(gram, kernel))
        gram_mat = gram_(xs)
        n = xs.shape[0]

        def objective(v):
            risk = .5 * jnp.sum((jnp.dot(gram_mat, v) - ys) ** 2.0)
            reg = regularization * jnp.sum(v ** 2.0)
            return risk + reg
        v = minimize(objective, jnp.zeros(n))

        def predict(x):
            prods = vmap(lambda x_: kernel(x, x_))(xs)
            return jnp.sum(v * prods)
        return jit(vmap(predict))

    rng = np.random.RandomState(0)
    xs, truth = rng.randn(30, 5).astype(np.float32), rng.randn(5).astype(np.float32)
    ys = jnp.dot(xs, truth)
    linear_kernel = lambda x, y: jnp.dot(x, y, precision=lax.Precision.HIGH)   # noqa: E731 -- as JAX wrote it
    predict = train(linear_kernel, xs, ys)
    rbf_kernel = lambda x, y: jnp.exp(-jnp.sum((x - y) ** 2))                 # noqa: E731
    # (the converged squared error, 1.7e-7, is rounding: measured against the scale of the targets' squares)
    mse = {"check": float(jnp.sum((predict(xs) - ys) ** 2.)), "scale": float(jnp.sum(ys ** 2.))}
    return {"mse": mse, "predict": _check(predict(xs)), "rbf": _check(gram(rbf_kernel, xs[:8])),
            "jaxpr": str(jax.make_jaxpr(partial(gram, rbf_kernel))(xs)).count(" exp ")}


# ---- examples/gaussian_process_regression.py (removed from JAX in 2024): jax.scipy.linalg's cholesky/solves ----
def run_gp() -> dict[str, Any]:
    numpts = 7
    key = random.key(0)
    eye = jnp.eye(numpts)
    scipy = jsp

    def cov_map(cov_func, xs, xs2=None):
        if xs2 is None:
            return vmap(lambda x: vmap(lambda y: cov_func(x, y))(xs))(xs)
        return vmap(lambda x: vmap(lambda y: cov_func(x, y))(xs))(xs2).T

    def softplus(x):
        return jnp.logaddexp(x, 0.)

    def exp_quadratic(x1, x2):
        return jnp.exp(-jnp.sum((x1 - x2)**2))

    def gp(params, x, y, xtest=None, compute_marginal_likelihood=False):
        noise = softplus(params['noise'])
        amp = softplus(params['amplitude'])
        ls = softplus(params['lengthscale'])
        ymean = jnp.mean(y)
        y = y - ymean
        x = x / ls
        train_cov = amp*cov_map(exp_quadratic, x) + eye * (noise + 1e-6)
        chol = scipy.linalg.cholesky(train_cov, lower=True)
        kinvy = scipy.linalg.solve_triangular(chol.T, scipy.linalg.solve_triangular(chol, y, lower=True))
        if compute_marginal_likelihood:
            log2pi = jnp.log(2. * 3.1415)
            ml = jnp.sum(-0.5 * jnp.dot(y.T, kinvy) - jnp.sum(jnp.log(jnp.diag(chol))) - (numpts / 2.) * log2pi)
            ml -= jnp.sum(-0.5 * jnp.log(2 * 3.1415) - jnp.log(amp) - 0.5 * jnp.log(amp)**2)  # lognormal prior
            return -ml
        if xtest is not None:
            xtest = xtest / ls
        cross_cov = amp*cov_map(exp_quadratic, x, xtest)
        mu = jnp.dot(cross_cov.T, kinvy) + ymean
        v = scipy.linalg.solve_triangular(chol, cross_cov, lower=True)
        var = (amp * cov_map(exp_quadratic, xtest) - jnp.dot(v.T, v))
        return mu, var

    marginal_likelihood = partial(gp, compute_marginal_likelihood=True)
    predict = partial(gp, compute_marginal_likelihood=False)
    grad_fun = jit(grad(marginal_likelihood))
    params = {"amplitude": jnp.zeros((1, 1)), "noise": jnp.zeros((1, 1)) - 5., "lengthscale": jnp.zeros((1, 1))}
    momentums = {k: p * 0. for k, p in params.items()}
    scales = {k: p * 0. + 1. for k, p in params.items()}
    lr = 0.01

    def train_step(params, momentums, scales, x, y):
        grads = grad_fun(params, x, y)
        for k in params:
            momentums[k] = 0.9 * momentums[k] + 0.1 * grads[k][0]
            scales[k] = 0.9 * scales[k] + 0.1 * grads[k][0]**2
            params[k] -= lr * momentums[k]/jnp.sqrt(scales[k] + 1e-5)
        return params, momentums, scales

    y_fun = lambda x: jnp.sin(x) + 0.1 * random.normal(key, shape=(x.shape[0], 1))   # noqa: E731
    x = (random.uniform(key, shape=(numpts, 1)) * 4.) + 1
    y = y_fun(x)
    xtest = jnp.linspace(0, 6., 9)[:, None]
    mls = []
    for i in range(30):
        params, momentums, scales = train_step(params, momentums, scales, x, y)
        if i % 10 == 0:
            mls.append(float(marginal_likelihood(params, x, y)))
    fixed = {"amplitude": jnp.full((1, 1), 0.5), "noise": jnp.full((1, 1), -3.), "lengthscale": jnp.full((1, 1), 0.2)}
    mu, var = predict(fixed, x, y, xtest)
    return {"ml": mls, "params": [float(params[k][0, 0]) for k in sorted(params)], "mu": _f(mu),
            "std": _f(jnp.sqrt(jnp.diag(var)))}


# ---- examples/mnist_classifier_fromscratch.py: a tanh MLP by grad and jit alone, on MNIST-shaped data ----
def run_mnist_fromscratch() -> dict[str, Any]:
    def init_random_params(scale, layer_sizes, rng=np.random.RandomState(0)):   # noqa: B008 -- as JAX wrote it
        return [(scale * rng.randn(m, n), scale * rng.randn(n))
                for m, n, in zip(layer_sizes[:-1], layer_sizes[1:])]   # noqa: B905

    def predict(params, inputs):
        activations = inputs
        for w, b in params[:-1]:
            outputs = jnp.dot(activations, w) + b
            activations = jnp.tanh(outputs)
        final_w, final_b = params[-1]
        logits = jnp.dot(activations, final_w) + final_b
        return logits - logsumexp(logits, axis=1, keepdims=True)

    def loss(params, batch):
        inputs, targets = batch
        preds = predict(params, inputs)
        return -jnp.mean(jnp.sum(preds * targets, axis=1))

    def accuracy(params, batch):
        inputs, targets = batch
        target_class = jnp.argmax(targets, axis=1)
        predicted_class = jnp.argmax(predict(params, inputs), axis=1)
        return jnp.mean(predicted_class == target_class)

    r = np.random.RandomState(1)
    train_images = r.rand(256, 784).astype(np.float32)
    train_labels = np.eye(10, dtype=np.float32)[r.randint(0, 10, 256)]
    step_size, batch_size, num_train = 0.001, 64, 256

    def data_stream():
        rng = np.random.RandomState(0)
        while True:
            perm = rng.permutation(num_train)
            for i in range(num_train // batch_size):
                batch_idx = perm[i * batch_size:(i + 1) * batch_size]
                yield train_images[batch_idx], train_labels[batch_idx]
    batches = data_stream()

    @jit
    def update(params, batch):
        grads = grad(loss)(params, batch)
        return [(w - step_size * dw, b - step_size * db) for (w, b), (dw, db) in zip(params, grads)]   # noqa: B905

    params = init_random_params(0.1, [784, 64, 32, 10])
    for _ in range(8):
        params = update(params, next(batches))
    return {"loss": float(loss(params, (train_images, train_labels))),
            "accuracy": float(accuracy(params, (train_images, train_labels))), "w": _check(params[1][0])}


# ---- docs: "Neural network and data loading": per-example predict, vmap, a numpy loader, a jitted update ----
def run_nn_data_loading() -> dict[str, Any]:
    def random_layer_params(m, n, key, scale=1e-2):
        w_key, b_key = random.split(key)
        return scale * random.normal(w_key, (n, m)), scale * random.normal(b_key, (n,))

    def init_network_params(sizes, key):
        keys = random.split(key, len(sizes))
        return [random_layer_params(m, n, k) for m, n, k in zip(sizes[:-1], sizes[1:], keys)]   # noqa: B905

    def relu(x):
        return jnp.maximum(0, x)

    def predict(params, image):
        activations = image
        for w, b in params[:-1]:
            outputs = jnp.dot(w, activations) + b
            activations = relu(outputs)
        final_w, final_b = params[-1]
        logits = jnp.dot(final_w, activations) + final_b
        return logits - logsumexp(logits)

    batched_predict = vmap(predict, in_axes=(None, 0))

    def one_hot(x, k, dtype=jnp.float32):
        return jnp.array(x[:, None] == jnp.arange(k), dtype)

    def accuracy(params, images, targets):
        target_class = jnp.argmax(targets, axis=1)
        predicted_class = jnp.argmax(batched_predict(params, images), axis=1)
        return jnp.mean(predicted_class == target_class)

    def loss(params, images, targets):
        preds = batched_predict(params, images)
        return -jnp.mean(preds * targets)

    step_size = 0.01

    @jit
    def update(params, x, y):
        grads = grad(loss)(params, x, y)
        return [(w - step_size * dw, b - step_size * db) for (w, b), (dw, db) in zip(params, grads)]   # noqa: B905

    params = init_network_params([784, 64, 64, 10], random.key(0))
    single = predict(params, random.normal(random.key(1), (28 * 28,)))
    r = np.random.RandomState(0)   # MNIST's shapes and range (uint8 pixels, int labels), in batches of 32
    images, labels = r.randint(0, 256, (128, 28, 28)).astype(np.uint8), r.randint(0, 10, 128)
    for i in range(0, 128, 32):
        x = np.ravel(np.array(images[i:i + 32], dtype=jnp.float32)).reshape(32, -1)
        params = update(params, x, one_hot(labels[i:i + 32], 10))
    flat = images.reshape(128, -1).astype(np.float32)
    return {"single": _f(single), "loss": float(loss(params, flat, one_hot(labels, 10))),
            "accuracy": float(accuracy(params, flat, one_hot(labels, 10))), "w": _check(params[2][0])}


# ---- docs: "Autodiff cookbook": grads of dicts, hvp, jacobians, per-example grads, complex ----
def run_autodiff_cookbook() -> dict[str, Any]:
    key = random.key(0)

    def sigmoid(x):
        return 0.5 * (jnp.tanh(x / 2) + 1)

    def predict(W, b, inputs):
        return sigmoid(jnp.dot(inputs, W) + b)

    inputs = jnp.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]])
    targets = jnp.array([True, True, False, True])

    def loss(W, b):
        preds = predict(W, b, inputs)
        label_probs = preds * targets + (1 - preds) * (1 - targets)
        return -jnp.sum(jnp.log(label_probs))

    key, W_key, b_key = random.split(key, 3)
    W = random.normal(W_key, (3,))
    b = random.normal(b_key, ())
    W_grad, b_grad = grad(loss, (0, 1))(W, b)
    dict_grad = grad(lambda p: loss(p['W'], p['b']))({'W': W, 'b': b})
    loss_value, _ = jax.value_and_grad(loss, (0, 1))(W, b)

    def hvp(f, x, v):
        return jvp(grad(f), (x,), (v,))[1]

    def f(X):
        return jnp.sum(jnp.tanh(X)**2)
    X = random.normal(key, (5, 4))
    V = random.normal(random.key(1), (5, 4))
    hv = hvp(f, X, V)
    hv_revrev = grad(lambda x: jnp.vdot(grad(f)(x), V))(X)
    J_fwd = jax.jacfwd(lambda W: predict(W, b, inputs))(W)
    J_rev = jax.jacrev(lambda W: predict(W, b, inputs))(W)
    J_dict = jax.jacrev(lambda p, x: predict(p['W'], p['b'], x))({'W': W, 'b': b}, inputs)
    H = jax.hessian(lambda W: loss(W, b))(W)
    per_example = vmap(grad(lambda W, x, t: -jnp.log(jnp.where(t, 1., 0.) * predict(W, b, x) +
                                                      jnp.where(t, 0., 1.) * (1 - predict(W, b, x)))),
                       in_axes=(None, 0, 0))(W, inputs, targets)
    _, vjp_fun = vjp(jnp.sin, X)
    mjp = vmap(vjp_fun)(jnp.ones((3, 5, 4)))[0]

    def fc(z):   # complex: grad of a real function of a complex argument, and holomorphic grads
        x, y = jnp.real(z), jnp.imag(z)
        return x**2 + y**2
    z = 3. + 4j
    gc = grad(fc)(z)
    gh = grad(lambda z: jnp.sin(z), holomorphic=True)(z)
    A = jnp.array([[5., 2. + 3j, 5j], [2. - 3j, 7., 1. + 7j], [-5j, 1. - 7j, 12.]])
    gdet = grad(lambda X: jnp.linalg.det(X), holomorphic=True)(A)
    return {"W_grad": _f(W_grad), "b_grad": float(b_grad), "dict_W": _f(dict_grad['W']), "loss": float(loss_value),
            "hv": _check(hv), "hv_revrev": _check(hv_revrev), "J_fwd": _f(J_fwd), "J_rev": _f(J_rev),
            "J_dict_W": _f(J_dict['W']), "J_dict_b": _f(J_dict['b']), "H": _f(H), "per_example": _f(per_example),
            "mjp": _check(mjp), "gc": [float(np.real(gc)), float(np.imag(gc))],
            "gh": [float(np.real(gh)), float(np.imag(gh))], "gdet": _f(np.real(gdet)) + _f(np.imag(gdet))}


# ---- docs: "Custom derivative rules": custom_jvp (log1pexp), custom_vjp (clip_gradient), a fixed point ----
def run_custom_derivatives() -> dict[str, Any]:
    @jax.custom_jvp
    def log1pexp(x):
        return jnp.log(1. + jnp.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = log1pexp(x)
        ans_dot = (1 - 1/(1 + jnp.exp(x))) * x_dot
        return ans, ans_dot

    @jax.custom_vjp
    def clip_gradient(lo, hi, x):
        return x  # identity function

    def clip_gradient_fwd(lo, hi, x):
        return x, (lo, hi)  # save bounds as residuals

    def clip_gradient_bwd(res, g):
        lo, hi = res
        return (None, None, jnp.clip(g, lo, hi))  # use None to indicate zero cotangents for lo and hi
    clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)

    def clip_sin(x):
        x = clip_gradient(-0.75, 0.75, x)
        return jnp.sin(x)

    @partial(jax.custom_vjp, nondiff_argnums=(0,))
    def fixed_point(f, a, x_guess):
        def cond_fun(carry):
            x_prev, x = carry
            return jnp.abs(x_prev - x) > 1e-6

        def body_fun(carry):
            _, x = carry
            return x, f(a, x)
        _, x_star = lax.while_loop(cond_fun, body_fun, (x_guess, f(a, x_guess)))
        return x_star

    def fixed_point_fwd(f, a, x_init):
        x_star = fixed_point(f, a, x_init)
        return x_star, (a, x_star)

    def fixed_point_rev(f, res, x_star_bar):
        a, x_star = res
        _, vjp_a = vjp(lambda a: f(a, x_star), a)
        a_bar, = vjp_a(fixed_point(partial(rev_iter, f), (a, x_star, x_star_bar), x_star_bar))
        return a_bar, jnp.zeros_like(x_star)

    def rev_iter(f, packed, u):
        a, x_star, x_star_bar = packed
        _, vjp_x = vjp(lambda x: f(a, x), x_star)
        return x_star_bar + vjp_x(u)[0]
    fixed_point.defvjp(fixed_point_fwd, fixed_point_rev)

    def newton_sqrt(a):
        update = lambda a, x: 0.5 * (x + a / x)   # noqa: E731 -- as JAX wrote it
        return fixed_point(update, a, a)
    t = jnp.linspace(0, 10, 7)
    return {"log1pexp": [float(grad(log1pexp)(100.)), float(jit(grad(log1pexp))(3.)),
                         float(vmap(jit(grad(log1pexp)))(jnp.arange(3.))[2])],
            "clip_sin": _f(vmap(grad(clip_sin))(t)), "sqrt": float(newton_sqrt(2.)),
            "vsqrt": _f(jit(vmap(newton_sqrt))(jnp.array([1., 2., 3., 4.]))),
            "dsqrt": [float(grad(newton_sqrt)(2.)), float(grad(grad(newton_sqrt))(2.))]}


# ---- docs: "Pseudorandom numbers", "Working with pytrees", "Stateful computations" ----
def run_random_pytrees_state() -> dict[str, Any]:
    key = random.key(42)
    new_key, subkey = random.split(key)
    keys = random.split(random.key(1701), 3)
    draws = [float(random.normal(k)) for k in keys] + _f(random.uniform(subkey, (3,)))
    draws += _f(random.key_data(new_key))

    class MyContainer:
        """A named container."""

        def __init__(self, name: str, a: int, b: int, c: int):
            self.name = name
            self.a = a
            self.b = b
            self.c = c

    jax.tree_util.register_pytree_node(MyContainer, lambda xs: ((xs.a, xs.b, xs.c), xs.name),
                                       lambda name, abc: MyContainer(name, *abc))
    mapped = jax.tree.map(lambda x: x + 1, [MyContainer('Alice', 1, 2, 3), MyContainer('Bob', 4, 5, 6)])

    class Params(NamedTuple):
        weight: Any
        bias: Any

    def init(rng) -> Params:
        weights_key, bias_key = random.split(rng)
        weight = random.normal(weights_key, ())
        bias = random.normal(bias_key, ())
        return Params(weight, bias)

    def loss(params: Params, x, y):
        pred = params.weight * x + params.bias
        return jnp.mean((pred - y) ** 2)

    @jit
    def update(params: Params, x, y) -> Params:
        grad_ = jax.grad(loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - 0.005 * g, params, grad_)

    rng = random.key(42)
    xs = random.normal(rng, (100,))
    noise = random.normal(rng, (100,)) * 0.5
    ys = xs * 3 - 1 + noise
    params = init(rng)
    for _ in range(100):
        params = update(params, xs, ys)

    class CounterState(NamedTuple):
        n: Any

    @jit
    def count(state: CounterState) -> tuple[Any, CounterState]:
        return state.n + 1, CounterState(state.n + 1)
    state = CounterState(jnp.array(0))
    for _ in range(3):
        value, state = count(state)
    names = [c.name == n for c, n in zip(mapped, ["Alice", "Bob"], strict=True)]
    return {"draws": draws, "mapped": [c.a + 10 * c.b + 100 * c.c for c in mapped] + names,
            "params": [float(params.weight), float(params.bias)], "counter": [int(value), int(state.n)],
            "leaves": len(jax.tree.leaves([None, None, None], is_leaf=lambda x: x is None))}


# ---- docs: "Convolutions" (lax.conv_general_dilated with dimension_numbers) and "Thinking in JAX" ----
def run_convolutions() -> dict[str, Any]:
    key = random.key(1701)
    x = jnp.linspace(0, 10, 50)
    y = jnp.sin(x) + 0.2 * random.normal(key, shape=(50,))
    y_smooth = jnp.convolve(y, jnp.ones(10) / 10, mode='same')
    image = jnp.array(np.random.RandomState(0).randint(0, 256, (24, 32, 3)).astype(np.uint8).mean(-1))
    noisy_image = image + 50 * random.normal(key, image.shape)
    xw = jnp.linspace(-3, 3, 7)
    window = jsp.stats.norm.pdf(xw) * jsp.stats.norm.pdf(xw[:, None])
    smooth_image = jsp.signal.convolve(noisy_image, window, mode='same')
    kernel = jnp.zeros((3, 3, 3, 3), dtype=jnp.float32)
    kernel += jnp.array([[1, 1, 0], [1, 0, -1], [0, -1, -1]])[:, :, jnp.newaxis, jnp.newaxis]
    img = jnp.asarray(np.random.RandomState(1).rand(1, 20, 18, 3).astype(np.float32))
    out_nchw = lax.conv(jnp.transpose(img, [0, 3, 1, 2]), jnp.transpose(kernel, [3, 2, 0, 1]), (1, 1), 'SAME')
    out_pad = lax.conv_with_general_padding(jnp.transpose(img, [0, 3, 1, 2]), jnp.transpose(kernel, [3, 2, 0, 1]),
                                            (1, 1), ((2, 2), (2, 2)), (1, 1), (1, 1))
    dn = lax.conv_dimension_numbers(img.shape, kernel.shape, ('NHWC', 'HWIO', 'NHWC'))
    outs = {
        "same": lax.conv_general_dilated(img, kernel, (1, 1), 'SAME', (1, 1), (1, 1), dn),
        "valid": lax.conv_general_dilated(img, kernel, (1, 1), 'VALID', (1, 1), (1, 1), dn),
        "strided": lax.conv_general_dilated(img, kernel, (2, 2), 'SAME', (1, 1), (1, 1), dn),
        "rhs_dilated": lax.conv_general_dilated(img, kernel, (1, 1), 'VALID', (1, 1), (12, 12), dn),
        "lhs_dilated": lax.conv_general_dilated(img, kernel, (1, 1), ((0, 0), (0, 0)), (2, 2), (1, 1), dn),
        "transposed": lax.conv_general_dilated(img, jnp.rot90(jnp.rot90(kernel, axes=(0, 1)), axes=(0, 1)), (1, 1),
                                               ((2, 1), (2, 1)), (2, 2), (1, 1), dn),
    }
    k1 = jnp.array([1, 0, -1], dtype=jnp.float32)[:, jnp.newaxis, jnp.newaxis]
    data1 = jnp.zeros((1, 40, 1), dtype=jnp.float32).at[0, 10:30, 0].set(1.0)
    dn1 = lax.conv_dimension_numbers(data1.shape, k1.shape, ('NWC', 'WIO', 'NWC'))
    outs["1d"] = lax.conv_general_dilated(data1, k1, (1,), 'SAME', (1,), (1,), dn1)
    k3 = jnp.array([[[0, 0, 0], [0, 1, 0], [0, 0, 0]], [[0, -1, 0], [-1, 0, -1], [0, -1, 0]],
                    [[0, 0, 0], [0, 1, 0], [0, 0, 0]]], dtype=jnp.float32)[:, :, :, jnp.newaxis, jnp.newaxis]
    gx, gy, gz = np.mgrid[0:1:8j, 0:1:8j, 0:1:8j]
    data3 = jnp.zeros((1, 8, 8, 8, 1), dtype=jnp.float32)
    data3 += (jnp.sin(2*gx*jnp.pi)*jnp.cos(2*gy*jnp.pi)*jnp.cos(2*gz*jnp.pi))[None, :, :, :, None]
    dn3 = lax.conv_dimension_numbers(data3.shape, k3.shape, ('NHWDC', 'HWDIO', 'NHWDC'))
    outs["3d"] = lax.conv_general_dilated(data3, k3, (1, 1, 1), 'SAME', (1, 1, 1), (1, 1, 1), dn3)
    res = {k: [list(v.shape), _check(v)] for k, v in outs.items()}
    res.update(smooth=_check(y_smooth), image=_check(smooth_image), nchw=[list(out_nchw.shape), _check(out_nchw)],
               pad=[list(out_pad.shape), _check(out_pad)], dn=[list(d) for d in dn])
    return res


def run_thinking_in_jax() -> dict[str, Any]:
    x = jnp.arange(10)
    y = x.at[0].set(10)

    def norm(X):
        X = X - X.mean(0)
        return X / X.std(0)
    norm_compiled = jit(norm)
    X = jnp.asarray(np.random.RandomState(1701).rand(50, 4).astype(np.float32))

    def get_negatives(x):
        return x[x < 0]

    @partial(jit, static_argnums=(1,))
    def f(x, neg):
        return -x if neg else x

    @jit
    def g(x):
        return x.reshape(jnp.array(x.shape).prod())   # noqa -- the tutorial's wrong way, which raises
    try:
        g(x)
        shape_error = False
    except TypeError:
        shape_error = True

    @jit
    def h(x):
        return x.reshape((np.prod(x.shape),))

    def selu(x, alpha=1.67, lambda_=1.05):
        return lambda_ * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)
    xs = jnp.asarray(np.random.RandomState(0).randn(100).astype(np.float32))
    return {"y": _f(y), "x": _f(x), "norm": _check(norm_compiled(X)), "negatives": _f(get_negatives(xs[:10])),
            "static": [float(f(1., True)), float(f(1., False))], "reshape": _f(h(jnp.ones((2, 3)))),
            "shape_error": shape_error, "selu": _check(jit(selu)(xs)), "selu_grad": _check(vmap(grad(selu))(xs)),
            "jaxpr_eqns": str(jax.make_jaxpr(lambda x: jnp.sin(x) * 2)(1.0)).count(" sin ")}


# jax 0.10.2's values of the run_* functions above (CPU, x64 off)
JAX: dict[str, dict[str, Any]] = {'advi': {'bounds': [3.814164, 7.942806, 10.89001, 12.6551, 14.40447, 14.76381],
          'params': [1.838614, 2.237435, -3.505361, -8.348743],
          'Z': {'check': 0.0, 'scale': 0.0},
          'samples': {'check': -1.019481, 'scale': 162.9193}},
 'control': {'K': [-0.9999999, -0.0, -0.0, -0.9999999, -0.9999999, -0.0, -0.0, -0.9999999, -0.9999999, -0.0, -0.0,
                   -0.9999999, -0.9999999, -0.0, -0.0, -0.9999999, -0.9999999, -0.0, -0.0, -0.9999999, -0.9999999,
                   -0.0, -0.0, -0.9999999, -0.9999999, -0.0, -0.0, -0.9999999, -0.9999999, -0.0, -0.0, -0.9999999,
                   -0.9999999, -0.0, -0.0, -0.9999999, -0.9999999, -0.0, -0.0, -0.9999999],
             'k': [-0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0,
                   -0.0, -0.0, -0.0, -0.0],
             'X': [0.3, -0.7, 2.980232e-08, -5.960464e-08, 3.552714e-15, -7.105427e-15, 4.235165e-22, -8.470329e-22,
                   5.04871e-29, -1.009742e-28, 6.018531e-36, -1.203706e-35, 0.0, -0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                   0.0, 0.0],
             'U': [-0.3, 0.6999999, -2.980232e-08, 5.960464e-08, -3.552713e-15, 7.105427e-15, -4.235164e-22,
                   8.470328e-22, -5.048709e-29, 1.009742e-28, -6.01853e-36, 1.203706e-35, 0.0, 0.0, 0.0, 0.0, 0.0,
                   0.0, 0.0, 0.0],
             'counter': [0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 0.0, 1.0],
             'Xn': [0.2, -0.02780445, 0.0003865436, 4.980533e-08, 6.201426e-16, 7.691538e-32, 0.0],
             'Un': [0.2603929, -3.378351e-06, -3.830554e-18, 1.592819e-20, 3.904292e-20, 8.086518e-20],
             'Xm': [0.3, -0.7, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
             'Um': [-0.3, 0.7, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]},
 'kernel_lsq': {'mse': {'check': 1.665278e-07, 'scale': 102.5024},
  'predict': {'check': -8.809061, 'scale': 49.61002},
  'rbf': {'check': 0.9125814, 'scale': 9.237389},
  'jaxpr': 1},
 'gp': {'ml': [2.024946, 1.811426, 1.481177],
        'params': [-0.2025701, 0.2397932, -5.178997],
        'mu': [0.1285811, 0.3008156, 0.8074481, 0.7275056, 0.1233754, -0.291137, -0.7050618, -0.5422549, 0.02319449],
        'std': [0.9868281, 0.9380506, 0.3130667, 0.1551673, 0.1856464, 0.6051188, 0.4863617, 0.545081, 0.9679645]},
 'mnist_fromscratch': {'loss': 2.337028, 'accuracy': 0.1015625, 'w': {'check': 2.334849, 'scale': 163.1797}},
 'nn_data_loading': {'single': [-2.295675, -2.306798, -2.296192, -2.309521, -2.318686, -2.293002, -2.302434,
                                -2.322938, -2.289287, -2.291922],
                     'loss': 0.2270675,
                     'accuracy': 0.1640625,
                     'w': {'check': -0.01021663, 'scale': 5.175781}},
 'autodiff_cookbook': {'W_grad': [-0.433146, -0.7354605, -1.259892],
                       'b_grad': -0.6900178,
                       'dict_W': [-0.433146, -0.7354605, -1.259892],
                       'loss': 2.972919,
                       'hv': {'check': -2.414388, 'scale': 9.276239},
                       'hv_revrev': {'check': -2.414388, 'scale': 9.27624},
                       'J_fwd': [0.05069415, 0.1091874, 0.07506633, 0.1417003, -0.1739049, 0.02415345, 0.125792,
                                 0.01451446, -0.3144799, 0.005744094, -0.0193281, 0.01078958],
                       'J_rev': [0.05069415, 0.1091874, 0.07506634, 0.1417003, -0.1739049, 0.02415345, 0.125792,
                                 0.01451446, -0.3144799, 0.005744094, -0.0193281, 0.01078958],
                       'J_dict_W': [0.05069415, 0.1091874, 0.07506634, 0.1417003, -0.1739049, 0.02415345, 0.125792,
                                    0.01451446, -0.3144799, 0.005744094, -0.0193281, 0.01078958],
                       'J_dict_b': [0.09748876, 0.161023, 0.2419077, 0.00776229],
                       'H': [0.2207195, -0.103014, -0.09525573, -0.1030143, 0.3591052, 0.0122537, -0.09525587,
                             0.01225387, 0.4852455],
                       'per_example': [-0.463074, -0.9973903, -0.6857058, -0.1775047, 0.2178467, -0.03025649,
                                       0.2132221, 0.02460255, -0.5330554, -0.005789387, 0.01948051, -0.01087466],
                       'mjp': {'check': 4.962669, 'scale': 37.14612},
                       'gc': [6.0, -8.0],
                       'gh': [-27.03495, -3.851153],
                       'gdet': [34.0, 11.0, -19.0, 11.0, 35.0, 10.0, -19.0, 10.0, 22.0, 0.0, 31.0, 18.0, -31.0, 0.0,
                                25.0, -18.0, -25.0, 0.0]},
 'custom_derivatives': {'log1pexp': [1.0, 0.9525741, 0.8807971],
                        'clip_sin': [0.75, -0.09572363, -0.75, 0.2836622, 0.75, -0.4612046, -0.75],
                        'sqrt': 1.414214,
                        'vsqrt': [1.0, 1.414214, 1.732051, 2.0],
                        'dsqrt': [0.3535534, -0.08838835]},
 'random_pytrees_state': {'draws': [-1.304116, 0.8893948, 1.464569, 0.7276642, 0.7878675, 0.1816943, 1832781000.0,
                                    270669600.0],
                          'mapped': [432, 765, True, True],
                          'params': [1.963557, -0.3723917],
                          'counter': [3, 3],
                          'leaves': 3},
 'convolutions': {'same': [[1, 20, 18, 3], {'check': -4.785219, 'scale': 1491.355}],
                  'valid': [[1, 18, 16, 3], {'check': -4.686523, 'scale': 853.4652}],
                  'strided': [[1, 10, 9, 3], {'check': 19.30783, 'scale': 349.5461}],
                  'rhs_dilated': [[1, 0, 0, 3], {'check': 0.0, 'scale': 0.0}],
                  'lhs_dilated': [[1, 37, 33, 3], {'check': -8.461258, 'scale': 1525.158}],
                  'transposed': [[1, 40, 36, 3], {'check': -7.930255, 'scale': 1953.179}],
                  '1d': [[1, 40, 1], {'check': 1.156396, 'scale': 4.0}],
                  '3d': [[1, 8, 8, 8, 1], {'check': -3.267452, 'scale': 152.0701}],
                  'smooth': {'check': -0.03361135, 'scale': 23.58095},
                  'image': {'check': 938.9706, 'scale': 89835.81},
                  'nchw': [[1, 3, 20, 18], {'check': -4.547879, 'scale': 1491.355}],
                  'pad': [[1, 3, 22, 20], {'check': 9.007578, 'scale': 2152.602}],
                  'dn': [[0, 3, 1, 2], [3, 2, 0, 1], [0, 3, 1, 2]]},
 'thinking_in_jax': {'y': [10.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
                     'x': [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
                     'norm': {'check': -2.760473, 'scale': 176.3268},
                     'negatives': [-0.9772779, -0.1513572, -0.1032189],
                     'static': [-1.0, 1.0],
                     'reshape': [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
                     'shape_error': True,
                     'selu': {'check': -9.424946, 'scale': 85.14981},
                     'selu_grad': {'check': -1.309428, 'scale': 97.15716},
                     'jaxpr_eqns': 1}}


def assert_as_jax(got: Any, want: Any, rtol: float, where: str = "") -> None:
    """`got` equals jax's `want` to `rtol` (an array to `rtol` of its largest element, a `_check` of its scale),
    structure and exact values (bools, strings) alike."""
    if isinstance(want, dict) and set(want) == {"check", "scale"}:
        assert abs(got["check"] - want["check"]) <= rtol * want["scale"] + 1e-30, (where, got, want)
        np.testing.assert_allclose(got["scale"], want["scale"], rtol=rtol, err_msg=where)
    elif isinstance(want, dict):
        assert set(got) == set(want), (where, set(got) ^ set(want))
        for k in want:
            assert_as_jax(got[k], want[k], rtol, f"{where}.{k}")
    elif isinstance(want, (bool, str)) or want is None:
        assert got == want, (where, got, want)
    elif isinstance(want, list) and any(isinstance(w, (list, dict, bool)) for w in want):
        assert len(got) == len(want), (where, got, want)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_as_jax(g, w, rtol, f"{where}[{i}]")
    else:   # an array's elements to rtol of its largest (jax's own Hessian here is symmetric to 1e-5 of an element)
        want = np.asarray(want, np.float64)
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol,
                                   atol=rtol * float(np.max(np.abs(want), initial=0.0)), err_msg=where)


@pytest.mark.parametrize("name", list(JAX))
def test_the_example_gives_jax_values(name: str) -> None:
    """Each ported example's values are jax 0.10.2's to float32 rounding: 1e-5 of each array's largest element (on
    the AMD EPYC host that recorded them, all agree to 1e-6 but the GP's marginal likelihoods after 30 steps of
    Cholesky solves, 2e-6; the margin is for other hosts' vector widths and summation orders)."""
    assert_as_jax(globals()[f"run_{name}"](), JAX[name], 1e-5, name)


def test_the_update_steps_trace_once_and_replay() -> None:
    """kernel_lsq's `update(i, opt_state)`, called with a new Python int each step, traces once; its replays run the
    program's kernels and build no graph (no schedule), as a jitted step should."""
    opt_init, opt_update, get_params = optimizers.momentum(1e-3, 0.9)
    f = lambda v: jnp.sum((v - 1.) ** 2)   # noqa: E731

    @jit
    def update(i, opt_state):
        return opt_update(i, grad(f)(get_params(opt_state)), opt_state)
    state = update(0, opt_init(jnp.zeros(4)))
    jax.counters.reset()
    for i in range(1, 6):
        state = update(i, state)
    get_params(state).block_until_ready()
    assert update.trace_count == 1 and jax.counters.schedule_count == 0 and jax.counters.compile_count == 0
