"""A whole training script, end to end at a small size (`bench/ported_training.py`, the bench's `training` program):
an optimiser chain with its schedule read from the count in its state, an EMA, gradient accumulation by `lax.scan`,
the state donated, keys split and folded every step, the loss read back and `debug.print`ed every step, an eval of
another batch shape, checkpoints saved and training resumed from one, numpy batches with a partial last one.

What is checked: the losses against jax's (recorded below), the traces and compiles (counted, never timed), what the
step printed, and that a resumed run is bit for bit the uninterrupted one."""
from __future__ import annotations

import os
import sys

import numpy as np

import tgfx as tg

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/ is not installed with tgfx

from bench.frameworks import tgfx_fw  # noqa: E402
from bench.ported_training import QUICK, Trainer  # noqa: E402

# the script's first 16 losses and its evals (step, accuracy, the EMA's accuracy) under jax 0.10.2 on the CPU
JAX_LOSSES = [1.3439433574676514, 1.3288960456848145, 1.3451619148254395, 1.528225302696228, 1.3646395206451416,
              1.298539161682129, 1.2698442935943604, 1.3706037998199463, 1.303422451019287, 1.3154125213623047,
              1.262228012084961, 1.2467068433761597, 1.1460720300674438, 1.307654857635498, 1.202154278755188,
              1.274440050125122]
# (jax's accuracies of 14 and 20 right of 48 are 1 ulp above the float32 quotient: XLA multiplies by 1/48)
JAX_EVALS = [(4, 14 / 48, 0.3125), (9, 0.375, 0.3125), (14, 20 / 48, 0.3125)]
STEPS = len(JAX_LOSSES)   # two epochs of 7 steps (the 7th a partial batch) and two more


def test_the_script_trains_as_under_jax_tracing_each_shape_once(tmp_path):
    t = Trainer(tgfx_fw(), QUICK, str(tmp_path))
    compiles = []
    for i in range(STEPS):
        before = tg.counters.compile_count, tg.counters.trace_count
        t.train(i)
        compiles.append((tg.counters.compile_count - before[0], tg.counters.trace_count - before[1]))
    np.testing.assert_allclose(t.losses, JAX_LOSSES, rtol=1e-5)
    assert [e[0] for e in t.evals] == [e[0] for e in JAX_EVALS]
    np.testing.assert_allclose([e[1:] for e in t.evals], [e[1:] for e in JAX_EVALS], rtol=1e-6)
    # one trace of the step per batch shape (full, and the epoch's partial last one) whatever the step number (a
    # Python int) and key, one of the eval: as jax's caches
    assert (t.step.trace_count, t.accuracy.trace_count) == (2, 1)
    # the second epoch on, nothing is traced or compiled (the partial batch's step 13, the evals 9 and 14 included)
    assert compiles[7:] == [(0, 0)] * (STEPS - 7)
    # debug.print ran at every step with the step's values
    lines = t.log.getvalue().splitlines()
    assert [line.split(":")[0] for line in lines] == [f"step {i}" for i in range(STEPS)]
    np.testing.assert_allclose([float(line.split()[-1]) for line in lines], t.losses, rtol=1e-6)
    # the state is donated: each step writes most of it in place (the params, moments and EMA; 25 arrays)
    full = (QUICK.batch, QUICK.d_in)
    (prog, _), = [v for k, v in t.step._cache._d.items() if any(s[1][0] == full for s in k[1] if s[0] == "tensor")]
    assert len(prog.donated) >= 20


def test_training_resumed_from_a_checkpoint_is_the_uninterrupted_run(tmp_path):
    fw = tgfx_fw()
    t = Trainer(fw, QUICK, str(tmp_path))
    for i in range(STEPS):
        t.train(i)
    # a new script (new jitted functions, nothing but the checkpoint carried over) restored after step 7
    resumed = Trainer(fw, QUICK, str(tmp_path))
    resumed.restore(QUICK.save_every)
    assert isinstance(resumed.opt_state, type(t.opt_state))   # the optimiser's NamedTuples come back
    for i in range(QUICK.save_every, STEPS):
        resumed.train(i)
    assert resumed.losses == t.losses[QUICK.save_every:]
    for a, b in zip(tg.tree.leaves(resumed.state()), tg.tree.leaves(t.state()), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
