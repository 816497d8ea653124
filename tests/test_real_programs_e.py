"""Sequence and generative models as JAX users write them (bench/ported_seqgen.py), at their quick sizes: each trains
to jax's losses, and a step after the first compiles and traces nothing.

The losses are jax 0.10.2's (CPU, the bench's jax Fw) for the same numpy initial values and batches: the first three
steps', each after an update by the one before.
"""
import os
import sys

import numpy as np
import pytest

import tgfx as tg

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # bench/ is not installed

_JAX_LOSSES = {
    "seq2seq": (2.6413609981536865, 2.582390546798706, 2.567329168319702),
    "sst2": (0.6984872221946716, 0.7015500068664551, 0.6954391002655029),
    "pixelcnn": (5.134696006774902, 4.9888129234313965, 4.772527694702148),
    "hnn": (0.4955334961414337, 0.5814366936683655, 0.4598545730113983),
    "graphnet": (1.0195024013519287, 0.828681468963623, 0.5809821486473083),
    "vqvae": (0.3290950059890747, 0.2843513786792755, 0.25635090470314026),
}


@pytest.mark.parametrize("name", sorted(_JAX_LOSSES))
def test_a_sequence_or_generative_program_trains_as_it_does_under_jax(name):
    """A seq2seq LSTM with dict carries, teacher forcing and a greedy decode (its accuracy added to the loss, so the
    decoded tokens agree too); a masked GRU classifier with AdamW at a warm-up-cosine rate; a PixelCNN's masked NHWC
    convolutions and discretised logistic mixture; a Hamiltonian network's grad-of-grad through an RK4 `scan`; a
    graph network's `segment_sum` / `segment_max` over a padded batch; a VQ-VAE's straight-through estimator and
    codebook EMA in the jitted step."""
    from bench import ported_seqgen
    from bench.frameworks import tgfx_fw
    run = getattr(ported_seqgen, name)(tgfx_fw(), True)
    np.testing.assert_allclose([float(run(i)) for i in range(3)], _JAX_LOSSES[name], rtol=2e-6)
    tg.counters.reset()
    float(run(3))
    assert tg.counters.compile_count == 0 and tg.counters.trace_count == 0


@pytest.mark.parametrize("shape", [(32, 32, 32, 3), (64, 32, 32, 3)])
def test_a_mean_squared_error_over_nhwc_images_rounds_as_jaxs(shape):
    """The VQ-VAE's reconstruction loss, a mean of squared errors over NHWC RGB images: its innermost axis (3) takes
    no vector, and its four reduce loops were summed in order into one register, 98,304 additions (1e-6 of the sum
    off float64's, 1.4e-5 in the full-size VQ-VAE's first loss; jax: 3.5e-8). Contiguous reduce axes are one loop now
    (`kernel_opts.merge_reduce_ranges`), summed in a vector's lanes."""
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    got = tg.jit(lambda a, b: ((a - b) ** 2).mean())(tg.asarray(x), tg.asarray(y))
    want = ((x.astype(np.float64) - y) ** 2).mean()
    assert abs(float(got) / want - 1) < 3e-7, float(got) / want - 1
    got = tg.jit(lambda a: (a * a).sum())(tg.asarray(x))
    want = (x.astype(np.float64) ** 2).sum()
    assert abs(float(got) / want - 1) < 3e-7, float(got) / want - 1


def test_the_vqvae_loss_at_the_bench_sizes_is_jax_s():
    """At the bench's sizes (32 images of 32 x 32) the VQ-VAE's first loss was 1.1e-5 off jax's (0.53712928 for
    0.53713536): its reconstruction mean, of a pixel-shuffled decoder output against the images, summed 98,304 squares
    in one register (its loops nested out of memory order, `kernel_opts.order_reduce_ranges`, and apart,
    `block_sum.chained`); now 1.1e-7."""
    from bench import ported_seqgen
    from bench.frameworks import tgfx_fw
    run = ported_seqgen.vqvae(tgfx_fw(), False)
    np.testing.assert_allclose(float(run(0)), 0.5371353626251221, rtol=5e-7)
