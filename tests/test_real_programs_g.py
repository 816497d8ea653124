"""Whole training scripts as users write them (`bench/ported_scripts.py`), at their quick sizes: the glue between
jitted steps (Python-float and eager-array learning rates, keys split outside `jit`, augmentations, eager metrics and
gradient norms, `tree_util` maps, evals at another batch size with a partial last batch, checkpoints, early stops).

What is checked: every value a script read back to Python against jax's (jax 0.10.2 on the CPU, the same script text
and numpy data, recorded below); saved checkpoints against numpy recomputations; and by counts, never times, that an
epoch after the first traces and compiles nothing, launches as many kernels as the one before, and leaves no more
live buffers behind (the interned scalar arguments of eager constants aside: a bounded pool, `constants.POOL_SIZE`).
"""
from __future__ import annotations

import gc
import os
import sys

import numpy as np
import pytest

import tgfx as tg
from tgfx.ir.uop import buffers
from tgfx.lowering import constants

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # bench/ is not installed

from bench import ported_scripts as ps  # noqa: E402

JAX_LOGGED = {
    "classifier": [
        {
            "loss": [1.1522021293640137, 0.9737191200256348, 0.6833921074867249],
            "eval_accuracy": [0.8428571428571429],
            "train_loss": [0.8730273246765137],
            "train_accuracy": [0.6145833134651184],
        },
        {
            "loss": [0.5028041005134583, 0.43066877126693726, 0.44951769709587097],
            "eval_accuracy": [0.8571428571428571],
            "train_loss": [0.4237673580646515],
            "train_accuracy": [0.8854166865348816],
        },
        {
            "loss": [0.3141251504421234, 0.19015708565711975, 0.1986437737941742],
            "eval_accuracy": [0.9142857142857143],
            "train_loss": [0.277940034866333],
            "train_accuracy": [0.9166666269302368],
        },
    ],
    "augment": [
        {
            "loss": [1.0616474151611328, 1.2104356288909912, 1.0940475463867188, 1.1983031034469604, 1.1427448987960815,
                     1.0933458805084229],
            "grad_norm": [0.19721923768520355, 0.6656114459037781, 0.4042755961418152, 0.6305521726608276,
                          0.44139376282691956, 0.14196912944316864],
            "eval_accuracy": [0.325],
        },
        {
            "loss": [1.1104652881622314, 1.0851187705993652, 1.0815938711166382, 1.0714982748031616, 1.0584527254104614,
                     1.1044936180114746],
            "grad_norm": [0.32290390133857727, 0.19295024871826172, 0.14667677879333496, 0.21464282274246216,
                          0.27634650468826294, 0.3891126811504364],
            "eval_accuracy": [0.25],
        },
        {
            "loss": [1.0674561262130737, 1.037341833114624, 1.054356336593628, 1.0667972564697266, 1.0481072664260864,
                     1.0546520948410034],
            "grad_norm": [0.19033990800380707, 0.19078314304351807, 0.2914089560508728, 0.29954585433006287,
                          0.20527522265911102, 0.2240200936794281],
            "eval_accuracy": [0.25],
        },
    ],
    "regression": [
        {
            "loss": [0.5477019548416138, 0.48291221261024475],
            "val_loss": [0.35287654399871826],
        },
        {
            "loss": [0.3553851544857025, 0.23600950837135315],
            "val_loss": [0.2942996621131897],
        },
        {
            "loss": [0.32055965065956116, 0.2331630289554596],
            "val_loss": [0.2530517280101776],
        },
        {
            "loss": [0.30120283365249634, 0.24771995842456818],
            "val_loss": [0.23631493747234344],
        },
        {
            "loss": [0.25580283999443054, 0.20224113762378693],
            "val_loss": [0.23128093779087067],
        },
        {
            "loss": [0.24335722625255585, 0.23948664963245392],
            "val_loss": [0.23067639768123627],
        },
    ],
    "autoencoder": [
        {
            "loss": [1.960942029953003, 1.3344725370407104, 1.5270861387252808],
            "train_loss": [1.6577688217163087],
            "ema_eval_loss": [1.6721995925903321],
        },
        {
            "loss": [1.509656310081482, 1.3934078216552734, 1.3540887832641602],
            "train_loss": [1.4123546600341796],
            "ema_eval_loss": [1.5217072105407714],
        },
        {
            "loss": [1.2475638389587402, 1.1340513229370117, 1.2752639055252075],
            "train_loss": [1.2353404998779296],
            "ema_eval_loss": [1.3625484085083008],
        },
    ],
    "charrnn": [
        {
            "loss": [3.374420166015625, 3.325326919555664, 3.299607276916504, 3.1948699951171875, 3.166900873184204,
                     3.0850982666015625, 3.045541286468506, 3.0629029273986816, 2.977113962173462, 3.0684471130371094],
            "perplexity": [19.943988800048828],
            "sample": [0.0, 0.0, 0.0, 0.0],
        },
        {
            "loss": [2.91851806640625, 3.011791467666626, 2.8787455558776855, 2.8047842979431152, 2.7965610027313232,
                     2.7353901863098145, 2.70058274269104, 2.647280216217041, 2.598395347595215, 2.4436843395233154],
            "perplexity": [11.42068862915039],
            "sample": [0.0, 12.0, 17.0, 28.0],
        },
        {
            "loss": [2.4685869216918945, 2.5606541633605957, 2.2600245475769043, 2.2327218055725098, 2.220165252685547,
                     2.0499038696289062, 2.130159378051758, 2.2074575424194336, 2.0052685737609863, 2.0453808307647705],
            "perplexity": [6.93120002746582],
            "sample": [10.0, 0.0, 22.0, 10.0],
        },
    ],
}


def _live_buffers() -> int:
    """Device buffers alive, the interned constant arguments aside."""
    gc.collect()
    interned = {id(b) for b in constants._interned}
    return sum(1 for k in list(buffers) if k not in interned)


def _run(name: str, ckpt: str, epochs: int = 0) -> tuple[list[ps.Epoch], list[tuple[int, int, int]], list[int]]:
    """The script's epochs (its own count, or `epochs`), and per epoch (traces, compiles, kernels) and the live
    buffers after it."""
    counts, live = [], []
    script = ps.SCRIPTS[name](ps.tgfx_lib(), True, ckpt, epochs)
    epochs = []
    while True:
        c = tg.counters
        before = c.trace_count, c.compile_count, c.kernel_count
        try:
            epochs.append(next(script))
        except StopIteration:
            return epochs, counts, live
        counts.append((c.trace_count - before[0], c.compile_count - before[1], c.kernel_count - before[2]))
        live.append(_live_buffers())


@pytest.mark.parametrize("name", sorted(JAX_LOGGED))
def test_a_whole_script_logs_jax_s_values_and_its_later_epochs_cost_the_same(name, tmp_path):
    epochs, counts, _ = _run(name, str(tmp_path))
    assert len(epochs) == len(JAX_LOGGED[name])
    for got, want in zip(epochs, JAX_LOGGED[name], strict=True):
        assert got.logged.keys() == want.keys()
        for k, v in want.items():
            np.testing.assert_allclose(got.logged[k], v, rtol=1e-5, err_msg=f"{name}: {k}")
    # the first epoch traces every jitted function (and the partial eval batch's shape); the later ones nothing, and
    # launch the same kernels (an eager op per step, a step per batch: no retrace or recompile per value)
    assert counts[0][0] > 0
    assert [c[:2] for c in counts[1:]] == [(0, 0)] * (len(counts) - 1)
    assert len({c[2] for c in counts[1:]}) == 1, counts


@pytest.mark.parametrize("name", sorted(JAX_LOGGED))
def test_an_epoch_leaves_no_more_live_buffers_than_the_one_before(name, tmp_path):
    """Five epochs (fewer where the script stops early): the last leaves as many buffers alive as the one before.
    (The second and third may keep a few more than the first: graphs first met there, such as `augment`'s batch
    augmentation scheduled alone once its zero-initialised bias was realised, keep their programs' buffers.)"""
    epochs, _, live = _run(name, str(tmp_path), epochs=5)
    assert len(epochs) >= 4
    assert live[3:] == [live[3]] * (len(live) - 3), live


def test_the_classifier_s_checkpoint_is_its_params_the_eval_accuracy_read_them(tmp_path):
    """The params `tg.save`d after the last epoch, loaded by `tg.load` and run through the MLP in numpy, classify the
    eval rows as the script's logged accuracy says (an identity between the checkpoint and the eval pass)."""
    epochs, _, _ = _run("classifier", str(tmp_path))
    saved = tg.load(str(tmp_path / f"classifier_{len(epochs) - 1}.safetensors"))
    p = {k: np.asarray(v, np.float64) for k, v in saved["params"].items()}
    assert set(saved["velocity"]) == set(p)
    rng = np.random.default_rng(0)
    x, y = ps._blobs(rng, 270, 8, 4)
    x_eval, y_eval = x[200:], y[200:]
    logits = np.maximum(x_eval @ p["w1"] + p["b1"], 0) @ p["w2"] + p["b2"]
    assert np.mean(logits.argmax(-1) == y_eval) == epochs[-1].logged["eval_accuracy"][0]


def test_the_regression_s_best_params_saved_by_numpy_give_its_best_validation_loss(tmp_path):
    epochs, _, _ = _run("regression", str(tmp_path))
    best = min(e.logged["val_loss"][0] for e in epochs)
    with np.load(tmp_path / "regression_best_tgfx.npz") as f:
        w, b = f["w"].astype(np.float64), float(f["b"])
    rng = np.random.default_rng(2)
    t = rng.uniform(-1, 1, 300).astype(np.float32)
    target = (np.sin(3 * t) + 0.1 * rng.standard_normal(t.shape)).astype(np.float32)
    feats = np.stack([t ** k for k in range(1, 6)], axis=1).astype(np.float32)
    np.testing.assert_allclose(np.mean((feats[240:] @ w + b - target[240:]) ** 2), best, rtol=1e-5)


# ---- numpy batches handed to a jitted step (every script above does it) ----
def test_a_numpy_batch_handed_to_a_jitted_step_is_copied_into_a_buffer_of_the_programs():
    """`step(w, x_train[rows])`: each call's numpy batch is copied into one of the program's own buffers (a few per
    argument, cycled), not into a new device buffer and a Tensor per call (an allocation per batch per step: a call
    with one numpy argument cost 14.6 us against 5.8 with a device array, jax's 6.7)."""
    step = tg.jit(lambda w, x: (x @ w).sum(0))
    w = tg.asarray(np.ones((4, 2), np.float32))
    batches = [np.full((8, 4), i, np.float32) for i in range(12)]
    for b in batches[:3]:
        step(w, b).block_until_ready()
    tg.counters.reset()
    got = [step(w, b).numpy() for b in batches[3:]]
    assert tg.counters.alloc_count == 0
    np.testing.assert_array_equal(got, [[32.0 * i] * 2 for i in range(3, 12)])
    assert step.trace_count == 1


def test_numpy_batches_queued_faster_than_the_device_runs_each_reach_their_own_call():
    """Calls queued without reading their results, more than the program has buffers for a batch: each call reads
    the batch it was given, and one refilled in place after its call (a loader's reused array) is read as it was."""
    step = tg.jit(lambda w, x: tg.numpy.tanh(x @ w) @ w.T)   # a few kernels: the calls queue behind each other
    rng = np.random.default_rng(0)
    w_np = rng.standard_normal((64, 64)).astype(np.float32) / 8
    w = tg.asarray(w_np)
    reused = np.empty((32, 64), np.float32)
    want, outs = [], []
    for _ in range(12):
        reused[:] = rng.standard_normal((32, 64))
        want.append(np.tanh(reused @ w_np) @ w_np.T)
        outs.append(step(w, reused))
    for o, e in zip(outs, want, strict=True):
        np.testing.assert_allclose(o.numpy(), e, rtol=1e-4, atol=1e-5)


def test_a_numpy_argument_the_program_returns_is_not_rewritten_by_the_next_call():
    """An identity's result is its input's buffer, handed out: the next call's batch goes elsewhere."""
    ident = tg.jit(lambda x, y: (x, y + 1))
    a = ident(np.arange(4, dtype=np.float32), np.zeros(2, np.float32))
    b = ident(np.arange(4, dtype=np.float32) + 10, np.ones(2, np.float32))
    np.testing.assert_array_equal(a[0].numpy(), np.arange(4))
    np.testing.assert_array_equal(b[0].numpy(), np.arange(4) + 10)
    np.testing.assert_array_equal(a[1].numpy(), [1, 1])
    np.testing.assert_array_equal(b[1].numpy(), [2, 2])


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.bool_, np.uint8, np.int32])
def test_numpy_arguments_of_each_type_trace_and_replay_as_their_tensors_do(dtype):
    """A 64-bit numpy type is its 32-bit kin without x64 (a Tensor of it is): the same trace as the Tensor's, the
    values converted; the others copied as they are."""
    f = tg.jit(lambda x: x * 2)
    for i in range(4):
        x = (np.arange(6).reshape(2, 3) + i).astype(dtype)
        got, want = f(x), f(tg.asarray(x))
        assert (got.dtype, got.shape) == (want.dtype, want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(got.numpy(), np.asarray(tg.asarray(x)).astype(got.numpy().dtype) * 2)
    assert f.trace_count == 1


def test_numpy_batches_from_several_threads_each_reach_their_own_call():
    import threading
    step = tg.jit(lambda w, x: x @ w)
    w_np = np.arange(12, dtype=np.float32).reshape(4, 3)
    w = tg.asarray(w_np)
    step(w, np.zeros((5, 4), np.float32)).block_until_ready()
    wrong = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(40):
            x = rng.integers(-8, 8, (5, 4)).astype(np.float32)   # exact in float32: any mix-up shows
            if not np.array_equal(step(w, x).numpy(), x @ w_np):
                wrong.append(seed)
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
