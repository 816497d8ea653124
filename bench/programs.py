"""Programs a user writes, timed for tgfx and jax side by side: `python -m bench.programs [--only a,b] [--quick]`.

The table (`bench/run.py`) times one function or one step of the sizes it names; these are whole training programs
as JAX's examples and their users write them, each written once against `Fw` (`bench/frameworks.py`), a few names
that both libraries spell alike (`xp` is `tgfx.numpy` or `jax.numpy`), so the two runs do the same arithmetic from
the same numpy initial values:

- `transformer`: a pre-norm decoder (embedding, causal multi-head attention, a GELU MLP, layer norms by hand), Adam,
  `jit(value_and_grad)`, character batches from numpy;
- `cnn_bn`: three 3x3 convolutions with batch norm (statistics of the batch), a residual add, a max pool, SGD with
  momentum and an exponentially decaying learning rate passed as a Python float;
- `lstm`: a character LSTM over `lax.scan`, its gates four slices of one product, SGD;
- `dpsgd`: differentially private SGD (JAX's example): `vmap` of per-example gradients, each clipped by its norm,
  summed, with Gaussian noise from a key split every step;
- `ode`: a neural ODE (an MLP's vector field) integrated by RK4 in a `fori_loop`, differentiated through the loop;
- `eager`: an MLP trained without `jit`: `value_and_grad`, momentum, a cosine learning rate, and the batch's
  accuracy read back every step;
- `eager_adam`: the gradient of a jitted loss taken eagerly (`value_and_grad(jit(loss))`), and Adam with a warm-up
  written as `tree_map`s outside `jit`, as optimizers written by hand are;
- `sampling`: a character RNN generating 32 tokens one at a time: a jitted cell, a key split and a categorical draw
  read back to the host per token (the "loss" is the sum of the tokens: the draws must agree bit for bit);
- `gnn`: a 3-layer message-passing network over a random graph (messages gathered by edge, `h[senders] @ w`, summed
  into their receivers by `segment_sum`), a node regression loss, `jit(value_and_grad)` and SGD;
- `kmeans`: Lloyd's k-means, ten iterations in a `fori_loop` (distances, an argmin, centroids as one-hot sums), one
  jitted call per step on a new batch of points; the "loss" is the final inertia;
- `decode`: greedy decoding of 128 tokens by a one-layer attention model with a KV cache: a `lax.scan` whose step
  writes its key and value rows with `dynamic_update_slice`, attends over the cache and takes an argmax (the "loss"
  is the sum of the tokens: they must agree one for one);
Ported from JAX users' programs (`bench/ported.py`):

- `spectral`: a pseudo-spectral 2-D Navier-Stokes solver (vorticity on a periodic grid): velocity from the stream
  function, the nonlinear term in real space between `irfft2` and `rfft2`, the 2/3 dealiasing mask, ten RK2 steps in
  a `fori_loop` per call; the "loss" is the enstrophy;
- `gat`: a 2-layer, multi-head graph attention network: attention logits per edge from its sender and receiver, a
  softmax over each receiver's edges by `segment_max` and `segment_sum`, messages summed by `segment_sum`, a node
  classification loss, `jit(value_and_grad)` and SGD;
- `cmaes`: CMA-ES on the Rosenbrock function, one jitted generation per step: samples from a key split every step,
  the covariance's square root by `eigh`, rank-one and rank-mu updates, the step-size path (the "loss" is the
  generation's best fitness);
- `sinkhorn`: log-domain entropic optimal transport between two point clouds (50 `logsumexp` updates in a
  `fori_loop`), the transport cost's gradient with respect to one cloud's points by `jit(value_and_grad)`, SGD;
- `ddpm`: a denoising diffusion training step: timesteps by `randint` and noise by `normal` from a key split every
  step, a sinusoidal time embedding, a SiLU MLP predicting the noise of 2-D points, Adam;
- `hmm`: the forward algorithm of a 16-state HMM over 256-step sequences (a `lax.scan` of `logsumexp`s), its
  negative log-likelihood differentiated with respect to unnormalised transition and emission logits, SGD;
- `reinforce`: REINFORCE on a deterministic walk on the plane: a `lax.scan` rollout drawing each action by
  `categorical` from a policy MLP, discounted returns by a reverse `scan`, the policy gradient with a batch-mean
  baseline, Adam (the "loss" is the batch's mean return).

More of them (`bench/ported_more.py`):

- `maml`: MAML on sinusoid regression: three inner SGD steps per task in a `fori_loop` (`grad` inside the loop),
  `vmap` over a batch of tasks, the query loss differentiated through the inner loop (a gradient of gradients), Adam;
- `hmc`: Hamiltonian Monte Carlo on a logistic regression's posterior: ten leapfrog steps (`grad` of the potential)
  in a `fori_loop`, a Metropolis test by `uniform`, `vmap` over 64 chains with a key each, ten moves in a `scan` per
  call (the "loss" is the chains' mean potential);
- `deq`: a deep equilibrium classifier: its hidden state the fixed point of a tanh layer found by `while_loop` to a
  tolerance, under a `custom_vjp` (the layer passed by `nondiff_argnums`) whose backward solves the adjoint by another
  fixed-point `while_loop` of `vjp`s, Adam;
- `lbfgs`: L-BFGS on an L2-regularised logistic regression, 30 iterations in a `fori_loop`: the two-loop recursion
  over a ring of 8 pairs (`fori_loop`s indexing it by the iteration count, `.at[].set`), a backtracking Armijo line
  search by `while_loop` (the "loss" is the final objective, a new problem each call);
- `ppo`: PPO on the walk of `reinforce`: a `scan` rollout of a policy and value MLP, advantages by GAE in a reverse
  `scan`, then four epochs of four minibatches (rows of a `permutation` drawn per epoch) of the clipped surrogate,
  value and entropy loss, each an Adam step in nested `scan`s, all in one jitted update (the "loss" is the
  critic's value of the start states after it);
- `vit`: a two-block vision transformer on 32 x 32 images: 4 x 4 patches by `reshape` and `transpose`, a class token
  by `concatenate`, fused qkv heads, layer norms, GELU MLPs, the class token's logits, Adam;
- `realnvp`: a RealNVP flow on two moons: six affine couplings with alternating masks, each scale and shift an MLP of
  the kept half (tanh-bounded log-scales), the log-determinant summed, maximum likelihood by Adam;
- `gpt` (realistic size, bench/ported_large.py): a GPT-style language model, 4 pre-layernorm blocks of d_model 256
  and 4 causal heads, GELU MLPs, the output projection tied to the embedding, a 2,048-token vocabulary, 16 x 128
  tokens a step, AdamW (matrices decayed) at a cosine-scheduled rate passed in as an array, global-norm clipping;
- `resnet` (realistic size): a ResNet-style CNN on 64 NHWC 32 x 32 x 3 images, a stem conv and 3 stages of two
  residual blocks (3 x 3 convs, batch norm in training mode with running statistics carried, a strided first block
  with a 1 x 1 projection), global average pooling, softmax cross-entropy, SGD with momentum and weight decay.

Gathers, scatters and selections (`bench/ported_sparse.py`):

- `word2vec`: skip-gram with negative sampling on a Zipfian corpus: two 5,000 x 64 embedding tables, batches of 1,024
  (center, context, 5 negatives) indices from numpy, the rows gathered, log-sigmoid losses, `jit(value_and_grad)` and
  SGD: each table's gradient a scatter-add of the batch's rows (the output table's, two of them);
- `moe`: a mixture-of-experts MLP layer on 512 tokens: 8 experts, top-2 routing by `lax.top_k` over the router's
  softmax, gates renormalised, tokens dispatched to a capacity of 160 by one-hot masks and `einsum`s (their queue
  places by `cumsum`, as Switch and GShard code does), Switch's load-balancing loss, Adam;
- `beam`: beam search (width 4, 32 steps) of a GRU language model for 16 prompts in a `lax.scan`: `top_k` over each
  prompt's width x vocabulary scores, the states gathered by their back-pointers (`take_along_axis`), a backtrace in
  a reverse `scan`; the "loss" is the best sequences' log-probability recomputed from their backtraced tokens (the
  tokens must be the beam's, and agree);
- `ctc`: a CTC loss: a two-layer 1-D convolutional encoder's log-probabilities gathered along the extended label
  sequences (blanks between labels of varying lengths), the forward variables' log-sum-exp recursion in a `lax.scan`
  over 64 frames, the loss read at each sequence's end by `take_along_axis`, differentiated, Adam.

Simulation and scientific machine learning (`bench/ported_science.py`):

- `md`: molecular dynamics as jax-md writes it: 512 particles of a Lennard-Jones liquid in a periodic box, the energy
  over all pairs by the minimum image (cut off at 2.5, shifted), forces its negative `grad`, ten velocity-Verlet steps
  in a `fori_loop` per call (the "loss" is the total energy, conserved);
- `filters`: a linear-Gaussian state-space model's exact log-likelihood by a Kalman filter (a `lax.scan` of 4 x 4
  matmuls, `linalg.solve` and `slogdet` over 100 observations), its gradient with respect to the model (a step up the
  likelihood), and a bootstrap particle filter's estimate (1,000 particles moved by a `cholesky` factor's noise,
  systematic resampling by `cumsum` and `searchsorted`, keys split every step);
- `fno`: a Fourier neural operator (four spectral layers: `rfft2`, the low modes times complex weights by `einsum`,
  written back with `.at[].set`, `irfft2`, beside a pointwise linear; the complex weights kept as real and imaginary
  pairs, as Adam takes real parameters) learning a heat flow on a 64 x 64 grid, batches of 8, Adam;
- `heat`: an inverse problem: a 128 x 128 heat equation in flux form with a conductivity field (stencils by
  `jnp.roll`), 50 explicit steps in a `fori_loop`, the misfit of its final state differentiated in reverse through
  the loop with respect to the initial condition and the log-conductivity, gradient descent.

Model families (`bench/ported_models.py`):

- `unet`: a diffusion model's U-Net denoiser on 16 NHWC 32 x 32 x 3 images: residual blocks of group norm, SiLU and
  3 x 3 convolutions, a sinusoidal time embedding through an MLP added in every block, two levels down by strided
  convolutions and two up by `lax.conv_transpose`, skips by concatenation, the denoising loss, Adam;
- `nerf`: NeRF on 1,024 rays of 64 stratified samples: positional encodings of points and view directions, an 8-layer
  width-128 MLP with the encoding concatenated back at its fifth, density and a view-dependent colour, volume
  rendering (alpha from density and spacing, the transmittance an exclusive `cumprod`, weights summing colours), Adam;
- `lru`: a 2-layer linear recurrent unit over sequences of 1,024: a diagonal complex recurrence (its eigenvalues
  exp(-exp(nu) + i exp(theta)), as real pairs) by `lax.associative_scan`, layer norms, GELU and a GLU, a mean-pooled
  classifier, Adam; `lru_scan` is the same model with its recurrence a `lax.scan`;
- `mamba`: a 2-layer Mamba-style language model on 8 x 256 tokens: a causal depthwise convolution
  (`feature_group_count`), input-dependent dt (softplus), B and C, the selective scan h = exp(dt A) h + dt B x by
  `lax.scan`, gated by SiLU, the embedding tied, next-token cross-entropy, Adam.

Reinforcement learning, sampling and unsupervised models (`bench/ported_rl.py`):

- `dqn`: DQN on 64 point-mass walks to a goal: epsilon-greedy actions (a `uniform` and a `randint` from a key split in
  the step), the transitions written into an 8,192-row replay buffer by `.at[ring index].set` inside the jitted step,
  a minibatch of 256 drawn by `randint` and gathered, a Huber loss against a target network copied eagerly every 10
  steps, Adam (the "loss" is the TD loss);
- `ising`: the 2-D Ising model at beta 0.44 on a 256 x 256 periodic lattice: 50 checkerboard Metropolis sweeps in a
  `fori_loop` a call, each colour's neighbours by `roll`s and its acceptances by a `uniform` of a key split every sweep
  (the "loss" is the energy per site: the same draws as jax's, so the same spins);
- `gmm_em`: EM for an 8-component Gaussian mixture on 8,192 8-D points, ten iterations in a `fori_loop` a call:
  log-densities by batched `cholesky`, `solve_triangular` and `slogdet`, responsibilities by `logsumexp`, weighted
  means and covariances by `einsum` (the "loss" is the negative mean log-likelihood);
- `wavenet`: a WaveNet on mu-law quantised audio (256 classes, 4 x 1,024 samples): ten dilated causal convolutions
  (`conv_general_dilated` with `rhs_dilation` 1 to 512 and left padding) with gated tanh x sigmoid units, residual and
  skip connections, softmax cross-entropy of the next sample, Adam;
- `simclr`: SimCLR's NT-Xent loss on 128 images: two views each by random crops (`vmap` of `dynamic_slice` at
  `randint` offsets), flips (`bernoulli`) and brightness, a small CNN encoder and projection head, the 256 x 256 cosine
  similarities with the diagonal masked, `logsumexp` over rows at temperature 0.5, SGD with momentum, a key split
  every step.

Sequence and generative models (`bench/ported_seqgen.py`):

- `seq2seq`: addition learnt as a sequence to sequence task: the reversed query "123+045" through an LSTM encoder (a
  `lax.scan` whose carry is a dict), its final carry starting an LSTM decoder fed the answer (teacher forcing), Adam,
  and a greedy decode of held-out problems (a `scan` feeding back its argmax) whose digit accuracy is added to the loss;
- `sst2`: an SST-2 style sentiment classifier: embeddings, sentences of varying length padded with a mask, a GRU over
  the padded batch (a padded step keeps its state), masked mean pooling, AdamW at a warm-up-cosine rate computed in
  the jitted step from its count;
- `pixelcnn`: a PixelCNN on NHWC images: mask-A and mask-B convolutions (kernels times causal masks), residual, and
  PixelCNN++'s discretised logistic mixture likelihood (edge bins open, `logsumexp` over the mixture), Adam;
- `hnn`: a Hamiltonian neural network on a pendulum: the vector field the symplectic `grad` of an MLP's H, fitted to
  the true derivatives and, integrated by RK4 in a `lax.scan`, to the true trajectories (a gradient of gradients);
- `graphnet`: a jraph-style graph network on padded ogbg-molpcba-like batches: edge, node (`segment_sum` and
  `segment_max` of incoming edges) and graph (mean of nodes) updates, the masked sigmoid cross-entropy of the labels
  present, Adam;
- `vqvae`: a VQ-VAE: a strided convolutional encoder, nearest-code quantisation, the straight-through estimator by
  `stop_gradient`, a pixel-shuffle decoder, the commitment loss, Adam, and the codebook's EMA updates in the same
  jitted step.

Sharded over two devices (`bench/ported_sharded.py`; tgfx's CPU:0 and CPU:1, jax's two host devices by
`XLA_FLAGS=--xla_force_host_platform_device_count=2`, set before jax imports; placed by `fw.shard`):

- `dp_mlp`: JAX's spmd_mnist_classifier_fromscratch: a tanh MLP classifier, the batch split along axis 0 and the
  parameters replicated, one jitted step of SGD with momentum whose gradient's all-reduce the sharding implies;
- `tp_mlp`: a small pre-norm model whose MLP blocks are Megatron's (the up projection split by columns, the down
  projection by rows, the hidden activations split with them, one all-reduce a block), Adam where each parameter lies;
- `dp_transformer`: a data-parallel transformer LM (token batches split, parameters replicated), dropout from a key
  split eagerly every step, a warm-up-then-cosine learning rate computed in Python between steps, Adam.

How users structure their code (`bench/ported_structure.py`):

- `eqx`: Equinox-style modules: a `register_pytree_node_class` linear layer inside a `register_dataclass` MLP with a
  static activation name and frozen normalisation buffers, the trainable leaves partitioned from the frozen ones
  (None in their place) and combined back in the loss, a NamedTuple Adam state, the step jitted with a hashable
  dataclass of hyperparameters as a static argument, and the model's `__call__` jitted as a function of the module
  (its held-out accuracy added to the loss);
- `remat`: mixed precision: float32 master weights cast to bfloat16 in the step, 12 pre-norm blocks under
  `checkpoint` (a `checkpoint_policies` policy) in a `lax.scan` over their stacked parameters, attention by `vmap`
  over the heads, the per-example losses by `lax.map`, a dynamic loss scale (a step skipped on overflow), Adam;
- `mps`: a matrix product state classifier (Stoudenmire and Schwab's feature map), contracted from both ends by
  three-operand `einsum`s, its accuracy a numpy metric through `pure_callback` and its loss logged by `io_callback`
  inside the jitted step, Adam;
- `pool_scan`: a convolution, max and mean pooling by `reduce_window`, the pooled rows read as a sequence through a
  linear recurrence by `associative_scan` and its running mean by a prefix sum, Adam;
- `odeint_adjoint`: a neural ODE fitted to a damped cubic spiral through `odeint` (adaptive Dormand-Prince, its
  gradient by the adjoint), Adam;
- `svi`: stochastic variational inference of a Bayesian logistic regression: a diagonal Gaussian posterior, particles
  by the reparameterisation trick from a key split in the jitted step, the log joint `vmap`ped over them, Adam;
- `actor_critic`: advantage actor-critic on 64 cart-poles written in jnp (`vmap` of the environment's step, reset on
  failure from a key), a `lax.scan` rollout drawing actions by `categorical` with keys split each step, advantages by
  GAE in a reverse `scan`, Adam.

A whole training script (`bench/ported_training.py`, which also runs alone and reports CPU time per step and in
total, and traces):

- `training`: an MLP classifier with dropout (a key per layer), `chain(clip_by_global_norm, adamw)` at a warm-up +
  cosine rate read from the count in the optimiser's state, an EMA of the parameters, gradient accumulation over
  micro-batches by `lax.scan`, the state donated; `split` every step and `fold_in` by the step inside it; the loss
  read back every step, `debug.print` in the step, an eval of another batch shape every few steps, checkpoints
  saved, and numpy batches shuffled per epoch with a partial last batch.

Whole scripts, timed end to end and by epoch rather than by step, have their own runner: `python -m
bench.ported_scripts` (classifier, augment, regression, autoencoder, charrnn: the eager glue between jitted steps).

Each prints the first call (trace, compile and run, in a process that imported the library already; tgfx on an
empty compile cache, a new `TGFX_CACHE_DIR`, as jax runs without its persistent cache; `--cache-dir` names one, and
the same one twice times a warm first call), the step time (min and median of `--steps` steps after three warm-up
steps) and the last loss: both libraries must agree on it (relative 1e-3), or the row says so and the exit status is
1. jax is skipped when it is not installed.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.frameworks import (
    Fw,
    Step,
    adam,
    adam_state,
    attention,
    batch,
    carried,
    dense,
    init,
    jax_fw,
    layer_norm,
    sgd_step,
    tgfx_fw,
)
from bench.ported import cmaes, ddpm, gat, hmm, reinforce, sinkhorn, spectral
from bench.ported_large import gpt, resnet
from bench.ported_models import lru, lru_scan, mamba, nerf, unet
from bench.ported_more import deq, hmc, lbfgs, maml, ppo, realnvp, vit
from bench.ported_rl import dqn, gmm_em, ising, simclr, wavenet
from bench.ported_science import filters, fno, heat, md
from bench.ported_seqgen import graphnet, hnn, pixelcnn, seq2seq, sst2, vqvae
from bench.ported_sharded import dp_mlp, dp_transformer, tp_mlp
from bench.ported_sparse import beam, ctc, moe, word2vec
from bench.ported_structure import actor_critic, eqx, mps, odeint_adjoint, pool_scan, remat, svi
from bench.ported_training import training


# ---- the programs: each returns its step function, state kept in a closure ----
def transformer(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    b, t, d, h, layers = (4, 16, 32, 4, 1) if quick else (16, 64, 128, 4, 2)
    text = np.frombuffer(b"the quick brown fox jumps over the lazy dog. to be or not to be. " * 40, np.uint8)
    vocab = 128
    rng = np.random.default_rng(0)

    def lin(i: int, o: int) -> dict[str, Any]:
        return {"w": fw.asarray(init(rng, i, o)), "b": fw.asarray(np.zeros(o, np.float32))}

    def norm() -> dict[str, Any]:
        return {"g": fw.asarray(np.ones(d, np.float32)), "b": fw.asarray(np.zeros(d, np.float32))}
    params = {"emb": fw.asarray(init(rng, vocab, d, scale=0.02)), "pos": fw.asarray(init(rng, t, d, scale=0.02)),
              "blocks": [{"n1": norm(), "q": lin(d, d), "k": lin(d, d), "v": lin(d, d), "o": lin(d, d), "n2": norm(),
                          "up": lin(d, 4 * d), "down": lin(4 * d, d)} for _ in range(layers)],
              "nf": norm(), "head": lin(d, vocab)}
    causal = fw.asarray(np.tril(np.ones((t, t), bool)))

    def self_attention(p: Any, x: Any) -> Any:
        q, k, v = (dense(p[n], x).reshape(b, t, h, d // h).transpose(0, 2, 1, 3) for n in "qkv")
        return dense(p["o"], attention(xp, q, k, v, causal))

    def loss(p: Any, tokens: Any, targets: Any) -> Any:
        x = p["emb"][tokens] + p["pos"]
        for blk in p["blocks"]:
            x = x + self_attention(blk, layer_norm(xp, blk["n1"], x))
            x = x + dense(blk["down"], fw.gelu(dense(blk["up"], layer_norm(xp, blk["n2"], x))))
        logits = dense(p["head"], layer_norm(xp, p["nf"], x))
        return -xp.take_along_axis(fw.log_softmax(logits), targets[..., None], axis=-1).mean()

    b1, b2, lr = 0.9, 0.999, 3e-3

    @fw.jit
    def step(p: Any, m: Any, v: Any, n: Any, tokens: Any, targets: Any) -> Any:
        value, g = fw.value_and_grad(loss)(p, tokens, targets)
        p, m, v, n = adam(fw, p, m, v, n, g, lr, b1, b2)
        return p, m, v, n, value
    state = adam_state(fw, params)
    draws = np.random.default_rng(1)

    def run(i: int) -> Any:
        at = draws.integers(0, len(text) - t - 1, size=b)
        window = np.stack([text[a:a + t + 1] for a in at]).astype(np.int32)
        *state[:], value = step(*state, fw.asarray(window[:, :-1]), fw.asarray(window[:, 1:]))
        return value
    return run


def cnn_bn(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    b, c, hw = (8, 8, 16) if quick else (32, 32, 32)
    rng = np.random.default_rng(0)

    def he(*s: int) -> Any:
        return fw.asarray(init(rng, *s, scale=math.sqrt(2 / np.prod(s[1:]))))
    ones, zeros = (lambda n: fw.asarray(np.ones(n, np.float32))), (lambda n: fw.asarray(np.zeros(n, np.float32)))
    params = {"c1": he(c, 3, 3, 3), "g1": ones(c), "b1": zeros(c), "c2": he(c, c, 3, 3), "g2": ones(c),
              "b2": zeros(c), "c3": he(2 * c, c, 3, 3), "g3": ones(2 * c), "b3": zeros(2 * c),
              "w": he(2 * c, 10), "wb": zeros(10)}

    def bn(x: Any, g: Any, bias: Any) -> Any:
        m = x.mean((0, 2, 3), keepdims=True)
        v = ((x - m) ** 2).mean((0, 2, 3), keepdims=True)
        return (x - m) / xp.sqrt(v + 1e-5) * g.reshape(1, -1, 1, 1) + bias.reshape(1, -1, 1, 1)

    def loss(p: Any, x: Any, y: Any) -> Any:
        x = xp.maximum(bn(fw.conv(x, p["c1"]), p["g1"], p["b1"]), 0)
        x = x + xp.maximum(bn(fw.conv(x, p["c2"]), p["g2"], p["b2"]), 0)
        x = x.reshape(b, c, hw // 2, 2, hw // 2, 2).max((3, 5))
        x = xp.maximum(bn(fw.conv(x, p["c3"]), p["g3"], p["b3"]), 0).mean((2, 3))
        return -(fw.log_softmax(x @ p["w"] + p["wb"]) * y).sum(-1).mean()

    @fw.jit
    def step(p: Any, mom: Any, x: Any, y: Any, lr: Any) -> Any:
        value, g = fw.value_and_grad(loss)(p, x, y)
        mom = fw.tree_map(lambda m, g: 0.9 * m + g, mom, g)
        return fw.tree_map(lambda p, m: p - lr * m, p, mom), mom, value
    images = rng.standard_normal((8 * b, 3, hw, hw)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 8 * b)]
    state = [params, fw.tree_map(lambda a: a * 0, params)]

    def run(i: int) -> Any:
        *state[:], value = step(*state, *batch(fw, i, b, images, labels), 0.05 * 0.99 ** i)
        return value
    return run


def lstm(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    b, t, v, h = (4, 8, 16, 32) if quick else (32, 32, 64, 256)
    rng = np.random.default_rng(0)
    params = {"wx": fw.asarray(init(rng, v, 4 * h)), "wh": fw.asarray(init(rng, h, 4 * h)),
              "b": fw.asarray(np.zeros(4 * h, np.float32)), "wo": fw.asarray(init(rng, h, v)),
              "bo": fw.asarray(np.zeros(v, np.float32))}

    def loss(p: Any, xs: Any, ys: Any) -> Any:
        def cell(carry: Any, x: Any) -> Any:
            hid, c = carry
            z = x @ p["wx"] + hid @ p["wh"] + p["b"]
            i, f, g, o = (fw.sigmoid(z[:, :h]), fw.sigmoid(z[:, h:2 * h]), xp.tanh(z[:, 2 * h:3 * h]),
                          fw.sigmoid(z[:, 3 * h:]))
            c = f * c + i * g
            hid = o * xp.tanh(c)
            return (hid, c), hid
        h0 = xp.zeros((b, h), dtype=xp.float32)
        _, hs = fw.lax.scan(cell, (h0, h0), xs)
        return -(fw.log_softmax(hs @ p["wo"] + p["bo"]) * ys).sum(-1).mean()

    step = sgd_step(fw, loss, 0.1)
    data, eye = rng.integers(0, v, (8 * b, t + 1)), np.eye(v, dtype=np.float32)
    state = [params]

    def run(i: int) -> Any:
        d = data[(i % 8) * b:(i % 8 + 1) * b]
        xs, ys = (np.ascontiguousarray(eye[part].transpose(1, 0, 2)) for part in (d[:, :-1], d[:, 1:]))
        state[0], value = step(state[0], fw.asarray(xs), fw.asarray(ys))
        return value
    return run


def _mlp(fw: Fw, quick: bool) -> tuple[int, list[Any], np.ndarray, np.ndarray]:
    """A batch size, a one-hidden-layer MLP's params (784 -> 256 -> 10), and eight batches of inputs and one-hot
    labels."""
    b, d_in, hidden = (16, 64, 32) if quick else (128, 784, 256)
    rng = np.random.default_rng(0)
    params = [(fw.asarray(init(rng, d_in, hidden)), fw.asarray(np.zeros(hidden, np.float32))),
              (fw.asarray(init(rng, hidden, 10)), fw.asarray(np.zeros(10, np.float32)))]
    images = rng.standard_normal((8 * b, d_in)).astype(np.float32)
    return b, params, images, np.eye(10, dtype=np.float32)[rng.integers(0, 10, 8 * b)]


def dpsgd(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    b, params, images, labels = _mlp(fw, quick)

    def loss(p: Any, x: Any, y: Any) -> Any:
        (w1, b1), (w2, b2) = p
        return -(fw.log_softmax(xp.tanh(x @ w1 + b1) @ w2 + b2) * y).sum()

    def clipped(p: Any, x: Any, y: Any) -> Any:
        g = fw.grad(loss)(p, x[None], y[None])
        norm = xp.sqrt(sum((leaf * leaf).sum() for pair in g for leaf in pair))
        return fw.tree_map(lambda leaf: leaf / xp.maximum(1.0, norm), g)

    @fw.jit
    def step(p: Any, x: Any, y: Any, key: Any) -> Any:
        gs = fw.vmap(clipped, in_axes=(None, 0, 0))(p, x, y)
        keys = fw.split(key, 4)
        flat = [leaf for pair in gs for leaf in pair]
        noised = [(leaf.sum(0) + 1.1 * fw.normal(k, leaf.shape[1:])) / b for leaf, k in zip(flat, keys, strict=True)]
        new = [(w - 0.1 * noised[2 * i], bias - 0.1 * noised[2 * i + 1]) for i, (w, bias) in enumerate(p)]
        return new, loss(new, x, y) / b
    state = [params, fw.key(0)]

    def run(i: int) -> Any:
        state[1], sub = fw.split(state[1])
        state[0], value = step(state[0], *batch(fw, i, b, images, labels), sub)
        return value
    return run


def ode(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    n, d, hidden, steps = (32, 4, 16, 10) if quick else (256, 8, 64, 40)
    rng = np.random.default_rng(0)
    params = {"w1": fw.asarray(init(rng, d, hidden, scale=0.3)), "b1": fw.asarray(np.zeros(hidden, np.float32)),
              "w2": fw.asarray(init(rng, hidden, d, scale=0.3))}

    def field(p: Any, y: Any) -> Any:
        return xp.tanh(y @ p["w1"] + p["b1"]) @ p["w2"]

    def loss(p: Any, y0: Any, target: Any) -> Any:
        def rk4(i: Any, y: Any) -> Any:
            dt = 0.05
            k1 = field(p, y)
            k2 = field(p, y + dt / 2 * k1)
            k3 = field(p, y + dt / 2 * k2)
            k4 = field(p, y + dt * k3)
            return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return ((fw.lax.fori_loop(0, steps, rk4, y0) - target) ** 2).mean()

    step = sgd_step(fw, loss, 0.05)
    y0, target = (fw.asarray(rng.standard_normal((n, d)).astype(np.float32)) for _ in range(2))
    return carried(step, params, y0, target)


def eager(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    b, params, images, labels = _mlp(fw, quick)

    def predict(p: Any, x: Any) -> Any:
        (w1, b1), (w2, b2) = p
        return xp.maximum(x @ w1 + b1, 0) @ w2 + b2

    def loss(p: Any, x: Any, y: Any) -> Any:
        return -(fw.log_softmax(predict(p, x)) * y).sum(-1).mean()
    state = [params, fw.tree_map(lambda a: a * 0, params)]

    def run(i: int) -> Any:
        x, y = batch(fw, i, b, images, labels)
        value, g = fw.value_and_grad(loss)(state[0], x, y)
        lr = 0.1 * 0.5 * (1 + math.cos(math.pi * i / 100))
        state[1] = fw.tree_map(lambda m, g: 0.9 * m + g, state[1], g)
        state[0] = fw.tree_map(lambda p, m: p - lr * m, state[0], state[1])
        fw.sync((predict(state[0], x).argmax(-1) == y.argmax(-1)).mean())   # the accuracy, read every step
        return value
    return run


def eager_adam(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    b, params, images, labels = _mlp(fw, quick)

    @fw.jit
    def loss(p: Any, x: Any, y: Any) -> Any:
        (w1, b1), (w2, b2) = p
        return -(fw.log_softmax(xp.tanh(x @ w1 + b1) @ w2 + b2) * y).sum(-1).mean()
    zeros = fw.tree_map(lambda a: a * 0, params)
    state = [params, zeros, zeros]

    def run(i: int) -> Any:
        p, m, v = state
        value, g = fw.value_and_grad(loss)(p, *batch(fw, i, b, images, labels))   # grad of a jitted function
        t = i + 1
        lr = 1e-3 * min(1.0, t / 10)                                              # warm-up, a Python float
        m = fw.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = fw.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        p = fw.tree_map(lambda p, m, v: p - lr * (m / (1 - 0.9 ** t)) / (xp.sqrt(v / (1 - 0.999 ** t)) + 1e-8), p, m, v)
        state[:] = [p, m, v]
        return value
    return run


def sampling(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    vocab, hidden, tokens = (16, 16, 8) if quick else (64, 128, 32)
    rng = np.random.default_rng(0)
    p = {"emb": fw.asarray(init(rng, vocab, hidden)), "wh": fw.asarray(init(rng, hidden, hidden)),
         "wo": fw.asarray(init(rng, hidden, vocab))}

    @fw.jit
    def cell(p: Any, h: Any, tok: Any) -> Any:
        h = xp.tanh(p["emb"][tok] + h @ p["wh"])
        return h, h @ p["wo"]
    state = [fw.key(0)]

    def run(i: int) -> Any:
        h, tok, total = xp.zeros(hidden, dtype=xp.float32), 0, 0
        for _ in range(tokens):          # one token at a time: a jitted cell, a key split and a draw, read back
            h, logits = cell(p, h, tok)
            state[0], sub = fw.split(state[0])
            tok = int(fw.categorical(sub, logits))
            total += tok
        return fw.asarray(np.float32(total))
    return run


def gnn(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    nodes, edges, d, layers = (64, 256, 8, 2) if quick else (1000, 5000, 32, 3)
    rng = np.random.default_rng(0)
    senders, receivers = (fw.asarray(rng.integers(0, nodes, edges).astype(np.int32)) for _ in range(2))
    feats = fw.asarray(rng.standard_normal((nodes, d)).astype(np.float32))
    target = fw.asarray(rng.standard_normal((nodes, 1)).astype(np.float32))
    params = {"layers": [{"msg": fw.asarray(init(rng, d, d)), "self": fw.asarray(init(rng, d, d)),
                          "b": fw.asarray(np.zeros(d, np.float32))} for _ in range(layers)],
              "out": fw.asarray(init(rng, d, 1))}

    def loss(p: Any, h: Any) -> Any:
        for lp in p["layers"]:
            messages = h[senders] @ lp["msg"]
            h = xp.tanh(fw.segment_sum(messages, receivers, nodes) / 4 + h @ lp["self"] + lp["b"])
        return ((h @ p["out"] - target) ** 2).mean()

    step = sgd_step(fw, loss, 0.1)
    return carried(step, params, feats)


def kmeans(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    n, d, k, iters = (256, 4, 4, 3) if quick else (2000, 8, 16, 10)
    rng = np.random.default_rng(0)
    batches = [rng.standard_normal((n, d)).astype(np.float32) + 3 * rng.standard_normal((1, d)).astype(np.float32)
               for _ in range(8)]

    @fw.jit
    def cluster(x: Any) -> Any:
        def lloyd(i: Any, c: Any) -> Any:
            dist = (x * x).sum(1)[:, None] - 2 * x @ c.T + (c * c).sum(1)[None, :]
            onehot = (dist.argmin(1)[:, None] == xp.arange(k)[None, :]).astype(xp.float32)
            counts = onehot.sum(0)
            return xp.where(counts[:, None] > 0, onehot.T @ x / xp.maximum(counts, 1.0)[:, None], c)
        c = fw.lax.fori_loop(0, iters, lloyd, x[:k])
        return ((x[:, None, :] - c[None, :, :]) ** 2).sum(-1).min(1).sum()

    def run(i: int) -> Any:
        return cluster(fw.asarray(batches[i % 8]))
    return run


def decode(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    vocab, d, tokens = (32, 16, 16) if quick else (256, 128, 128)
    rng = np.random.default_rng(0)
    p = {k: fw.asarray(init(rng, *s)) for k, s in dict(wq=(d, d), wk=(d, d), wv=(d, d), wo=(d, d), w1=(d, 4 * d),
                                                            w2=(4 * d, d)).items()}
    p["emb"] = fw.asarray(init(rng, vocab, d, scale=1.0))

    def token(carry: Any, _: Any) -> Any:
        tok, kc, vc, t = carry
        x = p["emb"][tok]
        q = x @ p["wq"]
        kc = lax.dynamic_update_slice(kc, (x @ p["wk"])[None], (t, 0))
        vc = lax.dynamic_update_slice(vc, (x @ p["wv"])[None], (t, 0))
        s = xp.where(xp.arange(tokens) <= t, kc @ q / math.sqrt(d), -1e9)
        a = xp.exp(s - s.max())
        h = x + (a / a.sum()) @ vc @ p["wo"]
        h = h + xp.tanh(h @ p["w1"]) @ p["w2"]
        nxt = xp.argmax(h @ p["emb"].T).astype(xp.int32)
        return (nxt, kc, vc, t + 1), nxt

    @fw.jit
    def generate(first: Any) -> Any:
        cache = xp.zeros((tokens, d), dtype=xp.float32)
        _, toks = lax.scan(token, (first, cache, cache, xp.asarray(0, dtype=xp.int32)), None, length=tokens)
        return toks.astype(xp.float32).sum()

    def run(i: int) -> Any:
        return generate(fw.asarray(np.int32(i % vocab)))
    return run


PROGRAMS: dict[str, Callable[[Fw, bool], Step]] = {
    "transformer": transformer, "cnn_bn": cnn_bn, "lstm": lstm, "dpsgd": dpsgd, "ode": ode, "eager": eager,
    "eager_adam": eager_adam, "sampling": sampling, "gnn": gnn, "kmeans": kmeans, "decode": decode,
    "spectral": spectral, "gat": gat, "cmaes": cmaes, "sinkhorn": sinkhorn, "ddpm": ddpm, "hmm": hmm,
    "reinforce": reinforce, "maml": maml, "hmc": hmc, "deq": deq, "lbfgs": lbfgs, "ppo": ppo, "vit": vit,
    "realnvp": realnvp, "gpt": gpt, "resnet": resnet, "word2vec": word2vec, "moe": moe, "beam": beam, "ctc": ctc,
    "md": md, "filters": filters, "fno": fno, "heat": heat,
    "unet": unet, "nerf": nerf, "lru": lru, "lru_scan": lru_scan, "mamba": mamba,
    "dqn": dqn, "ising": ising, "gmm_em": gmm_em, "wavenet": wavenet, "simclr": simclr,
    "dp_mlp": dp_mlp, "tp_mlp": tp_mlp, "dp_transformer": dp_transformer, "training": training,
    "seq2seq": seq2seq, "sst2": sst2, "pixelcnn": pixelcnn, "hnn": hnn, "graphnet": graphnet, "vqvae": vqvae,
    "eqx": eqx, "remat": remat, "mps": mps, "pool_scan": pool_scan, "odeint_adjoint": odeint_adjoint, "svi": svi,
    "actor_critic": actor_critic}


@dataclass
class Timing:
    first_ms: float
    step_min_ms: float
    step_med_ms: float
    loss: float


def time_program(fw: Fw, name: str, steps: int, quick: bool) -> Timing:
    run = PROGRAMS[name](fw, quick)
    t0 = time.perf_counter()
    fw.sync(run(0))
    first = time.perf_counter() - t0
    for i in range(1, 4):
        fw.sync(run(i))
    times, loss = [], 0.0
    for i in range(4, 4 + steps):
        t0 = time.perf_counter()
        loss = fw.sync(run(i))
        times.append(time.perf_counter() - t0)
    return Timing(first * 1e3, min(times) * 1e3, statistics.median(times) * 1e3, loss)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(PROGRAMS), help=f"comma-separated, of: {','.join(PROGRAMS)}")
    ap.add_argument("--steps", type=int, default=20, help="timed steps after three warm-up steps")
    ap.add_argument("--quick", action="store_true", help="small sizes (the smoke test)")
    ap.add_argument("--frameworks", default="tgfx,jax", help="tgfx,jax (jax skipped when not installed)")
    ap.add_argument("--cache-dir", default="", help="tgfx's compile cache (default: a new, empty one): give a run's "
                    "own again for a warm first call, a new process reading what the last one compiled")
    args = ap.parse_args(argv)
    from tgfx import config
    config.CACHE_DIR.value = args.cache_dir or tempfile.mkdtemp(prefix="tgfx-programs-")   # a cold first call
    names = [n for n in args.only.split(",") if n]
    if unknown := [n for n in names if n not in PROGRAMS]:
        ap.error(f"unknown program(s) {unknown}; choose from {','.join(PROGRAMS)}")
    fws = [tgfx_fw()]
    if "jax" in args.frameworks.split(","):
        try:
            fws.append(jax_fw())
        except ImportError:
            print("jax is not installed: tgfx only")
    print(f"{'program':12s} {'framework':9s} {'first call ms':>14s} {'step min ms':>12s} {'step med ms':>12s} "
          f"{'last loss':>10s}  tgfx/jax (step min, first call)")
    failed = False
    for name in names:
        got = {fw.name: time_program(fw, name, args.steps, args.quick) for fw in fws}
        for fw_name, tm in got.items():
            ratio = ""
            if fw_name == "jax":
                tg_t = got["tgfx"]
                agree = abs(tg_t.loss - tm.loss) <= 1e-3 * max(abs(tm.loss), 1e-6)
                failed |= not agree
                ratio = (f"{tg_t.step_min_ms / tm.step_min_ms:.2f}, {tg_t.first_ms / tm.first_ms:.2f}" +
                         ("" if agree else "  LOSSES DIFFER"))
            print(f"{name:12s} {fw_name:9s} {tm.first_ms:14.0f} {tm.step_min_ms:12.2f} {tm.step_med_ms:12.2f} "
                  f"{tm.loss:10.5f}  {ratio}")
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
