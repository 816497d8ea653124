"""A variational autoencoder (Kingma & Welling, 2014) on binarised 8x8 images, as JAX's examples/mnist_vae.py.

    python examples/train_vae.py                  # sklearn's digits when scikit-learn is installed
    python examples/train_vae.py --steps 500 --synthetic

The encoder, an MLP, maps an image to the mean and log-variance of a diagonal Gaussian over a 16-d latent code; one
code is drawn from it with the reparameterisation trick (z = mean + exp(log_var / 2) * eps, eps from
`tg.random.normal`), so the sample is a differentiable function of the parameters; the decoder, another MLP, maps
the code to one Bernoulli logit per pixel. The loss is the negative evidence lower bound: the binary cross-entropy
of the image under those logits plus the KL divergence of the encoder's Gaussian from the standard normal prior.

As in JAX's example, images are binarised afresh at every step (each pixel is 1 with probability its intensity,
`tg.random.bernoulli`), and every step draws from its own keys: the jitted step takes a key, splits it with
`tg.random.split`, and returns the key for the next step. The optimiser is Adam, written out here as in JAX's
`example_libraries.optimizers`, because its learning rate comes from a Python schedule at every step: a Python
float argument of a `tg.jit` function is traced once as a weakly typed scalar (as in JAX), so a new rate each step
replays the same compiled program.

Without scikit-learn the images are a synthetic "bars" data set made here: 8x8 images with one to three horizontal
or vertical bars, a classic test for latent variable models, so the example needs nothing but numpy and tgfx.
"""
from __future__ import annotations

import argparse
import math
import time
from typing import Any, NamedTuple

import numpy as np

import tgfx as tg
import tgfx.numpy as tnp

Params = dict[str, Any]
LATENT = 16
HIDDEN = 256


def encoder(hidden: int, latent: int) -> tg.nn.Sequential:
    """image -> (mean, log-variance) of q(z | x), concatenated on the last axis."""
    return tg.nn.Sequential(tg.nn.Linear(hidden), tg.nn.softplus, tg.nn.Linear(2 * latent))


def decoder(hidden: int, pixels: int) -> tg.nn.Sequential:
    """latent code -> one Bernoulli logit per pixel."""
    return tg.nn.Sequential(tg.nn.Linear(hidden), tg.nn.softplus, tg.nn.Linear(pixels))


def synthetic_bars(n: int, seed: int, side: int = 8) -> np.ndarray:
    """n images of `side` x `side` pixel intensities in [0, 1]: one to three bars, each a whole row or column, at
    0.95 on a 0.05 background (so binarising them flips a few pixels)."""
    rng = np.random.default_rng(seed)
    images = np.full((n, side, side), 0.05, np.float32)
    for img, k in zip(images, rng.integers(1, 4, n), strict=True):
        for bar in rng.choice(2 * side, k, replace=False):
            if bar < side:
                img[bar, :] = 0.95
            else:
                img[:, bar - side] = 0.95
    return images.reshape(n, side * side)


def load_images(seed: int, synthetic: bool) -> tuple[np.ndarray, str]:
    """Pixel intensities in [0, 1], one image per row, and what they are: sklearn's 1,797 digits (8x8, 0..16 scaled
    to [0, 1]) when scikit-learn is installed and `synthetic` is false, else 2,048 synthetic bar images."""
    if not synthetic:
        try:
            from sklearn.datasets import load_digits
        except ImportError:
            pass
        else:
            return (load_digits().data / 16.0).astype(np.float32), "sklearn digits"
    return synthetic_bars(2048, seed), "synthetic bars (scikit-learn not used)"


def bernoulli_nll(logits: tg.Tensor, x: tg.Tensor) -> tg.Tensor:
    """-log p(x | logits) of binary pixels x, summed over the last axis: binary cross-entropy with logits,
    softplus(l) - x * l, which neither overflows nor loses precision for large |l|."""
    return (tg.nn.softplus(logits) - x * logits).sum(axis=-1)


def gaussian_kl(mean: tg.Tensor, log_var: tg.Tensor) -> tg.Tensor:
    """KL(N(mean, exp(log_var)) || N(0, I)), summed over the last axis."""
    return -0.5 * (1 + log_var - mean * mean - tnp.exp(log_var)).sum(axis=-1)


class VAE:
    """The model: the two MLPs and the loss, over params {"encoder": ..., "decoder": ...}."""

    def __init__(self, pixels: int, hidden: int = HIDDEN, latent: int = LATENT) -> None:
        self.pixels, self.latent = pixels, latent
        self.encoder, self.decoder = encoder(hidden, latent), decoder(hidden, pixels)

    def init(self, key: tg.Tensor) -> Params:
        k_enc, k_dec = tg.random.split(key)
        return {"encoder": self.encoder.init(k_enc, (1, self.pixels)),
                "decoder": self.decoder.init(k_dec, (1, self.latent))}

    def loss(self, params: Params, x: tg.Tensor, eps: tg.Tensor) -> tg.Tensor:
        """The negative ELBO, averaged over the batch, with the reparameterisation noise `eps` (batch, latent)."""
        stats = self.encoder.apply(params["encoder"], x)
        mean, log_var = stats[:, :self.latent], stats[:, self.latent:]
        z = mean + tnp.exp(0.5 * log_var) * eps
        logits = self.decoder.apply(params["decoder"], z)
        return (bernoulli_nll(logits, x) + gaussian_kl(mean, log_var)).mean()


def adam_init(params: Params) -> tuple[Params, Params, tg.Tensor]:
    """Adam's state: zero first and second moments shaped like the params, and the step count (an int32 Tensor, so
    the jitted step sees the same signature every step)."""
    def zeros() -> Params:
        return tg.tree.tree_map(lambda p: tnp.zeros(p.shape, p.dtype), params)
    # two trees, not one passed twice: tgfx's jit reads a Tensor given twice on its first call through one buffer in
    # every replay, even once the two arguments differ (a bug, 2026-12-01)
    return zeros(), zeros(), tnp.zeros((), tg.dtypes.int32)


def adam_update(grads: Params, state: tuple[Params, Params, tg.Tensor], params: Params, lr: Any,
                b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> tuple[Params, tuple]:
    """One Adam step (Kingma & Ba, 2015) with learning rate `lr`: new params and state."""
    mu, nu, count = state
    mu = tg.tree.tree_map(lambda m, g: b1 * m + (1 - b1) * g, mu, grads)
    nu = tg.tree.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, nu, grads)
    count = count + 1
    t = count.astype(tg.dtypes.float32)
    # the moments start at 0, so their running means are too small by a factor 1 - b^t early on: divide it out
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    new = tg.tree.tree_map(lambda p, m, v: p - lr * (m / c1) / (tnp.sqrt(v / c2) + eps), params, mu, nu)
    return new, (mu, nu, count)


def make_step(model: VAE) -> tg.jit:
    """The training step, jitted: binarise the batch, draw the noise, and take one Adam step on the negative ELBO."""
    @tg.jit
    def train_step(params: Params, opt_state: tuple, key: tg.Tensor, intensities: tg.Tensor,
                   lr: float) -> tuple[Params, tuple, tg.Tensor, tg.Tensor]:
        keys = tg.random.split(key, 3)
        # the draws are materialised: left lazy, tgfx fuses their 20-round hash into every matmul that reads them
        # and computes it again for each output column (twice the step time and the compile time here)
        x = tg.random.bernoulli(keys[1], intensities).astype(tg.dtypes.float32).contiguous()
        eps = tg.random.normal(keys[2], (x.shape[0], model.latent)).contiguous()
        loss, grads = tg.value_and_grad(model.loss)(params, x, eps)
        params, opt_state = adam_update(grads, opt_state, params, lr)
        return params, opt_state, keys[0], loss
    return train_step


def cosine_lr(step: int, total: int, peak: float, warmup: int = 50) -> float:
    """The learning rate at `step`: a linear warm-up to `peak`, then a cosine decay to a tenth of it."""
    if step < warmup:
        return peak * (step + 1) / warmup
    frac = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


class Training(NamedTuple):
    losses: list[float]          # mean loss (negative ELBO, nats per image) of each --log-every steps
    trace_count: int             # how many times the jitted step was traced
    compiles_after_first: int    # kernels compiled after the first step (0: every later step replayed it)


def run(argv: list[str] | None = None) -> Training:
    """Train the VAE, printing progress. `main` returns the last loss of this."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3, help="peak learning rate of the schedule")
    ap.add_argument("--hidden", type=int, default=HIDDEN)
    ap.add_argument("--latent", type=int, default=LATENT)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--synthetic", action="store_true", help="use the synthetic bars even with scikit-learn")
    args = ap.parse_args(argv)

    images, what = load_images(args.seed, args.synthetic)
    model = VAE(images.shape[1], args.hidden, args.latent)
    key, init_key = tg.random.split(tg.random.key(args.seed))
    params = model.init(init_key)
    opt_state = adam_init(params)
    step = make_step(model)
    rng = np.random.default_rng(args.seed)
    print(f"{what}: {len(images)} images of {images.shape[1]} pixels; VAE {images.shape[1]}-{args.hidden}-"
          f"{args.latent}, batch {args.batch}, {args.steps} steps")

    recent: list[tg.Tensor] = []
    losses: list[float] = []
    start = time.perf_counter()
    for i in range(args.steps):
        batch = tg.asarray(images[rng.integers(0, len(images), args.batch)])
        params, opt_state, key, loss = step(params, opt_state, key, batch, cosine_lr(i, args.steps, args.lr))
        if i == 0:
            print(f"first step (trace + compile): {(time.perf_counter() - start) * 1e3:.0f} ms")
            t1, compiles = time.perf_counter(), tg.counters.compile_count
        recent.append(loss)
        if len(recent) == args.log_every or i == args.steps - 1:
            losses.append(float(np.mean([v.item() for v in recent])))  # reading the losses waits for the device
            recent = []
            print(f"step {i + 1:5d}  loss (negative ELBO) {losses[-1]:.3f} nats", flush=True)
    per_step = (time.perf_counter() - t1) / max(1, args.steps - 1)
    later = tg.counters.compile_count - compiles
    print(f"{per_step * 1e3:.2f} ms/step after the first; train step traced {step.trace_count} time(s), {later} "
          f"kernels compiled after the first step")
    return Training(losses, step.trace_count, later)


def main(argv: list[str] | None = None) -> float:
    """Train the VAE (see `run`); returns the mean loss (negative ELBO) of the last `--log-every` steps."""
    return run(argv).losses[-1]


if __name__ == "__main__":
    main()
