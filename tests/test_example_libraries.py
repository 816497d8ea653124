"""`tgfx.example_libraries` (JAX's `jax.example_libraries.optimizers` and `stax`): JAX's own examples port by spelling.

The optimisers' values are jax 0.10.2's, recorded from the same program run under `jax.example_libraries` (a stax
MLP, clipped gradients, a jitted update called with a Python int step, schedules); the layers' against numpy."""
from __future__ import annotations

import numpy as np
import pytest
from test_eager_cost import python_calls

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.example_libraries import optimizers, stax

RNG = np.random.default_rng(0)
X = RNG.standard_normal((32, 20)).astype(np.float32)
Y = np.eye(4, dtype=np.float32)[RNG.integers(0, 4, 32)]
W1, B1 = (RNG.standard_normal((20, 16)) * 0.3).astype(np.float32), (RNG.standard_normal(16) * 0.1).astype(np.float32)
W2, B2 = (RNG.standard_normal((16, 4)) * 0.3).astype(np.float32), (RNG.standard_normal(4) * 0.1).astype(np.float32)
_, predict = stax.serial(stax.Dense(16), stax.Relu, stax.Dense(4), stax.LogSoftmax)


def loss(params, batch):
    inputs, targets = batch
    return -tnp.mean(tnp.sum(predict(params, inputs) * targets, axis=1))


def params0():
    return [(tnp.asarray(W1), tnp.asarray(B1)), (), (tnp.asarray(W2), tnp.asarray(B2)), ()]


# jax's loss after 8 jitted updates (jax 0.10.2, jax.example_libraries, the same data and program)
JAX_LOSSES = {
    "sgd": (lambda: optimizers.sgd(0.1), 1.165802),
    "momentum": (lambda: optimizers.momentum(optimizers.exponential_decay(0.1, 4, 0.5), mass=0.9), 0.983272),
    "nesterov": (lambda: optimizers.nesterov(0.05, 0.9), 0.9180942),
    "adagrad": (lambda: optimizers.adagrad(0.05), 0.9271716),
    "rmsprop": (lambda: optimizers.rmsprop(0.01), 0.6260384),
    "rmsprop_momentum": (lambda: optimizers.rmsprop_momentum(0.005), 0.3904419),
    "adam": (lambda: optimizers.adam(optimizers.inverse_time_decay(0.01, 3, 0.3, staircase=True)), 1.045932),
    "adamax": (lambda: optimizers.adamax(optimizers.polynomial_decay(0.02, 6, 0.005)), 0.9530583),
    "piecewise": (lambda: optimizers.adam(optimizers.piecewise_constant([3, 6], [0.01, 0.005, 0.001])), 1.10686),
}


@pytest.mark.parametrize("name", list(JAX_LOSSES))
def test_optimizers_train_as_jax_and_trace_once(name: str) -> None:
    """As JAX's mnist_classifier writes its step: `update(next(itercount), opt_state, batch)` jitted, the step a
    Python int (one trace for every step), `get_params` inside."""
    make, want = JAX_LOSSES[name]
    opt_init, opt_update, get_params = make()

    @tg.jit
    def update(i, opt_state, batch):
        g = optimizers.clip_grads(tg.grad(loss)(get_params(opt_state), batch), 1.0)
        return opt_update(i, g, opt_state)

    state = opt_init(params0())
    assert isinstance(state, optimizers.OptimizerState)
    for i in range(8):
        state = update(i, state, (X, Y))
    assert update.trace_count == 1
    np.testing.assert_allclose(float(loss(get_params(state), (X, Y))), want, rtol=2e-6)


def test_sm3_eagerly_as_jax() -> None:
    opt_init, opt_update, get_params = optimizers.sm3(0.1)
    state = opt_init(params0())
    for i in range(4):
        state = opt_update(i, tg.grad(loss)(get_params(state), (X, Y)), state)
    np.testing.assert_allclose(float(loss(get_params(state), (X, Y))), 1.093838, rtol=2e-6)


def test_adam_against_its_formula() -> None:
    """Adam's update written out in numpy (the bias correction by step i + 1), on a dict of parameters."""
    g = {"a": np.array([0.5, -1.0, 2.0], np.float32), "b": np.float32(0.25)}
    opt_init, opt_update, get_params = optimizers.adam(0.1, b1=0.8, b2=0.9, eps=1e-6)
    state = opt_init({"a": tnp.zeros(3), "b": tnp.asarray(1.0)})
    want = {"a": np.zeros(3), "b": np.float64(1.0)}
    m = {k: np.zeros_like(v) for k, v in want.items()}
    v = {k: np.zeros_like(v) for k, v in want.items()}
    for i in range(3):
        state = opt_update(i, {k: tnp.asarray(x * (i + 1)) for k, x in g.items()}, state)
        for k in want:
            gi = g[k].astype(np.float64) * (i + 1)
            m[k] = 0.2 * gi + 0.8 * m[k]
            v[k] = 0.1 * gi ** 2 + 0.9 * v[k]
            want[k] = want[k] - 0.1 * (m[k] / (1 - 0.8 ** (i + 1))) / (np.sqrt(v[k] / (1 - 0.9 ** (i + 1))) + 1e-6)
    got = get_params(state)
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k], rtol=1e-5)


def test_schedules_values() -> None:
    steps = np.arange(12)
    np.testing.assert_allclose([float(optimizers.exponential_decay(0.1, 4, 0.5)(i)) for i in steps],
                               0.1 * 0.5 ** (steps / 4), rtol=1e-6)
    np.testing.assert_allclose([float(optimizers.inverse_time_decay(1.0, 3, 0.5, staircase=True)(i)) for i in steps],
                               1 / (1 + 0.5 * np.floor(steps / 3)), rtol=1e-6)
    np.testing.assert_allclose([float(optimizers.polynomial_decay(1.0, 8, 0.1, power=2.0)(i)) for i in steps],
                               (1 - np.minimum(steps, 8) / 8) ** 2 * 0.9 + 0.1, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose([float(optimizers.piecewise_constant([3, 6], [1.0, 0.5, 0.25])(i)) for i in steps],
                               np.where(steps > 6, 0.25, np.where(steps > 3, 0.5, 1.0)))
    assert optimizers.make_schedule(0.3)(7) == 0.3
    with pytest.raises(ValueError, match="values must be one longer than boundaries"):
        optimizers.piecewise_constant([1, 2], [1.0, 2.0])


def test_clip_grads_and_l2_norm() -> None:
    g = {"a": tnp.asarray([3.0, 0.0]), "b": [tnp.asarray(4.0)]}
    assert float(optimizers.l2_norm(g)) == 5.0
    clipped = optimizers.clip_grads(g, 1.0)
    np.testing.assert_allclose(clipped["a"].numpy(), [0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(optimizers.clip_grads(g, 10.0)["b"][0].numpy(), 4.0)


def test_state_unpacks_to_containers_and_back() -> None:
    opt_init, opt_update, get_params = optimizers.momentum(0.1, 0.9)
    state = opt_update(0, {"w": tnp.ones(2)}, opt_init({"w": tnp.zeros(2)}))
    marked = optimizers.unpack_optimizer_state(state)
    assert isinstance(marked["w"], optimizers.JoinPoint)
    x, velocity = marked["w"].subtree
    np.testing.assert_allclose(velocity.numpy(), [1.0, 1.0])
    again = optimizers.pack_optimizer_state(marked)
    np.testing.assert_allclose(get_params(opt_update(1, {"w": tnp.ones(2)}, again))["w"].numpy(), [-0.29, -0.29],
                               rtol=1e-6)
    with pytest.raises(TypeError, match="every leaf must be a JoinPoint"):
        optimizers.pack_optimizer_state({"w": tnp.ones(2)})


def test_a_gradient_tree_of_another_structure_is_named() -> None:
    opt_init, opt_update, _ = optimizers.sgd(0.1)
    state = opt_init({"w": tnp.zeros(2), "b": tnp.zeros(())})
    with pytest.raises(TypeError, match="does not match the parameter tree"):
        opt_update(0, {"w": tnp.zeros(2)}, state)


def test_layers_shapes_and_values_against_numpy() -> None:
    """Each layer's init shape is its output's; values against numpy (Dense, pools, BatchNorm, the fan layers)."""
    x = np.random.default_rng(1).standard_normal((2, 6, 4, 3)).astype(np.float32)
    key = tg.random.PRNGKey(0)
    layers = {
        "conv": stax.Conv(5, (3, 3), (1, 1), "SAME"), "conv_valid": stax.Conv(2, (2, 3), (2, 1)),
        "conv_t": stax.ConvTranspose(2, (3, 3), (2, 2), "SAME"), "max": stax.MaxPool((2, 2), (2, 2)),
        "avg": stax.AvgPool((3, 3), (2, 2), "SAME"), "sum": stax.SumPool((2, 2)), "bn": stax.BatchNorm(),
        "flat": stax.serial(stax.Flatten, stax.Dense(7), stax.Gelu),
        "fan": stax.serial(stax.FanOut(2), stax.parallel(stax.Identity, stax.Tanh), stax.FanInConcat()),
    }
    out = {}
    for name, (init_fun, apply_fun) in layers.items():
        shape, params = init_fun(key, (-1, 6, 4, 3))
        out[name] = apply_fun(params, tnp.asarray(x)).numpy()
        assert out[name].shape[1:] == tuple(shape[1:]), name
    np.testing.assert_allclose(out["max"], x.reshape(2, 3, 2, 2, 2, 3).max(axis=(2, 4)), rtol=1e-6)
    np.testing.assert_allclose(out["sum"], np.lib.stride_tricks.sliding_window_view(x, (2, 2), (1, 2)).sum((-1, -2)),
                               rtol=1e-5)
    padded = np.pad(x, ((0, 0), (0, 1), (0, 1), (0, 0)))      # SAME, stride 2, window 3: one after, on both axes
    counts = np.pad(np.ones((6, 4)), ((0, 1), (0, 1)))
    win = np.lib.stride_tricks.sliding_window_view
    np.testing.assert_allclose(out["avg"], win(padded, (3, 3), (1, 2))[:, ::2, ::2].sum((-1, -2)) /
                               win(counts, (3, 3))[::2, ::2].sum((-1, -2))[None, :, :, None], rtol=1e-5)
    mean, var = x.mean((0, 1, 2)), x.var((0, 1, 2))
    np.testing.assert_allclose(out["bn"], (x - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out["fan"], np.concatenate([x, np.tanh(x)], -1), rtol=1e-6)
    shape, (w, b) = stax.Dense(3)[0](key, (5, 4))
    assert shape == (5, 3) and w.shape == (4, 3) and b.shape == (3,)
    rows = x.reshape(-1, 4)[:5]
    np.testing.assert_allclose(stax.Dense(3)[1]((w, b), tnp.asarray(rows)).numpy(), rows @ w.numpy() + b.numpy(),
                               rtol=1e-5)


def test_dropout_keeps_with_probability_rate_and_needs_a_key() -> None:
    """As JAX's stax: `rate` is the probability of keeping an element, and kept ones are divided by it."""
    init_fun, apply_fun = stax.serial(stax.Dropout(0.75), stax.Identity)
    _, params = init_fun(tg.random.PRNGKey(0), (100, 100))
    out = apply_fun(params, tnp.ones((100, 100)), rng=tg.random.PRNGKey(1)).numpy()
    kept = out != 0
    assert abs(kept.mean() - 0.75) < 0.02 and np.allclose(out[kept], 1 / 0.75)
    _, test_apply = stax.Dropout(0.75, mode="test")
    np.testing.assert_array_equal(test_apply((), tnp.ones(3), rng=tg.random.PRNGKey(1)).numpy(), np.ones(3))
    with pytest.raises(ValueError, match="needs a PRNG key"):
        apply_fun(params, tnp.ones((2, 2)))


def test_jax_mnist_vae_example_ported_by_spelling() -> None:
    """JAX's examples/mnist_vae.py as written (stax encoder with FanOut/parallel, optimizers.momentum, an epoch as
    one jitted lax.fori_loop that slices its batch with dynamic_slice_in_dim and folds the step into the key),
    small and on fixed binary images: jax 0.10.2's test ELBOs and sampled images, and one trace for both epochs."""
    from tgfx import lax, random
    from tgfx.example_libraries.stax import Dense, FanOut, Relu, Softplus

    def gaussian_kl(mu, sigmasq):
        return -0.5 * tnp.sum(1. + tnp.log(sigmasq) - mu ** 2. - sigmasq)

    def gaussian_sample(rng, mu, sigmasq):
        return mu + tnp.sqrt(sigmasq) * random.normal(rng, mu.shape)

    def bernoulli_logpdf(logits, x):
        return -tnp.sum(tnp.logaddexp(0., tnp.where(x, -1., 1.) * logits))

    def elbo(rng, params, images):
        enc_params, dec_params = params
        mu_z, sigmasq_z = encode(enc_params, images)
        logits_x = decode(dec_params, gaussian_sample(rng, mu_z, sigmasq_z))
        return bernoulli_logpdf(logits_x, images) - gaussian_kl(mu_z, sigmasq_z)

    def image_sample(rng, params, nrow, ncol):
        _, dec_params = params
        code_rng, img_rng = random.split(rng)
        logits = decode(dec_params, random.normal(code_rng, (nrow * ncol, 10)))
        sampled_images = random.bernoulli(img_rng, tnp.logaddexp(0., logits))
        return sampled_images.reshape((nrow, ncol, 28, 28)).transpose((0, 2, 1, 3)).reshape((nrow * 28, ncol * 28))

    encoder_init, encode = stax.serial(Dense(512), Relu, Dense(512), Relu, FanOut(2),
                                       stax.parallel(Dense(10), stax.serial(Dense(10), Softplus)))
    decoder_init, decode = stax.serial(Dense(512), Relu, Dense(512), Relu, Dense(28 * 28))
    step_size, batch_size, nrow, ncol = 0.001, 32, 2, 3
    train_images = (np.random.RandomState(0).rand(320, 784) > 0.7).astype(np.float32)
    num_batches = train_images.shape[0] // batch_size
    enc_init_rng, dec_init_rng = random.split(random.PRNGKey(2))
    _, init_encoder_params = encoder_init(enc_init_rng, (batch_size, 28 * 28))
    _, init_decoder_params = decoder_init(dec_init_rng, (batch_size, 10))
    opt_init, opt_update, get_params = optimizers.momentum(step_size, mass=0.9)
    train_images = tg.device_put(train_images)

    def binarize_batch(rng, i, images):
        i = i % num_batches
        batch = lax.dynamic_slice_in_dim(images, i * batch_size, batch_size)
        return random.bernoulli(rng, batch)

    @tg.jit
    def run_epoch(rng, opt_state, images):
        def body_fun(i, opt_state):
            elbo_rng, data_rng = random.split(random.fold_in(rng, i))
            batch = binarize_batch(data_rng, i, images)
            g = tg.grad(lambda params: -elbo(elbo_rng, params, batch) / batch_size)(get_params(opt_state))
            return opt_update(i, g, opt_state)
        return lax.fori_loop(0, num_batches, body_fun, opt_state)

    @tg.jit
    def evaluate(opt_state, images):
        params = get_params(opt_state)
        elbo_rng, data_rng, image_rng = random.split(random.PRNGKey(3), 3)
        binarized_test = random.bernoulli(data_rng, images)
        return elbo(elbo_rng, params, binarized_test) / images.shape[0], image_sample(image_rng, params, nrow, ncol)

    opt_state = opt_init((init_encoder_params, init_decoder_params))
    got = []
    for epoch in range(2):
        opt_state = run_epoch(random.PRNGKey(epoch), opt_state, train_images)
        test_elbo, sampled_images = evaluate(opt_state, train_images[:50])
        got.append((float(test_elbo), int(sampled_images.numpy().sum()), sampled_images.shape))
    assert run_epoch.trace_count == 1 and evaluate.trace_count == 1
    # jax: (-538.8969, 3160, (56, 84)), (-521.4968, 2963, (56, 84))
    # (float32 rounding that differs by machine class may move a logit across a uniform draw: a pixel or two)
    np.testing.assert_allclose([g[0] for g in got], [-538.8969, -521.4968], rtol=5e-6)
    np.testing.assert_allclose([g[1] for g in got], [3160, 2963], atol=3)
    assert [g[2] for g in got] == [(56, 84), (56, 84)]


def test_a_jitted_step_taking_an_optimizer_state_and_a_python_int_replays_by_the_fast_path() -> None:
    """`update(i, opt_state)` (JAX's examples: advi, kernel_lsq) replays without `tree_flatten`: OptimizerState is a
    registered pytree node, which jit's fast path flattened by hand, keyed by its aux data (the parameters' tree
    structures). It went the general path each step, making a Tensor of each new `i` (238 Python calls a step; now
    75; kernel_lsq's step 126 -> 20 us, jax 17-71). Another structure of parameters (other aux data) retraces."""
    opt_init, opt_update, get_params = optimizers.momentum(0.1, 0.9)

    @tg.jit
    def update(i, opt_state):
        return opt_update(i, tg.grad(lambda p: tnp.sum(p["w"] ** 2) + tnp.sum(p.get("b", 0.0) ** 2))(
            get_params(opt_state)), opt_state)

    state = opt_init({"w": tg.device_put(tnp.ones(8), "CPU")})   # (the bound counts the CPU queue's submission)
    for k in range(3):
        state = update(k, state)
    get_params(state)["w"].block_until_ready()
    calls, state = python_calls(lambda: update(3, state))
    assert calls <= 90, calls
    w, v = np.ones(8, np.float32), np.zeros(8, np.float32)
    for _ in range(4):   # momentum: v = 0.9 v + g, w -= 0.1 v, g = 2 w
        v = 0.9 * v + 2 * w
        w = w - 0.1 * v
    np.testing.assert_allclose(get_params(state)["w"].numpy(), w, rtol=1e-6)
    other = update(0, opt_init({"w": tnp.ones(8), "b": tnp.ones(2)}))
    np.testing.assert_allclose(get_params(other)["b"].numpy(), np.full(2, 0.8, np.float32), rtol=1e-6)
    assert update.trace_count == 2
