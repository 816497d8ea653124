"""More whole training scripts as users write them (`bench/ported_scripts2.py`), at their quick sizes: a GAN's two
models and optimisers alternating, MAML's grad of inner grads over tasks drawn from split keys, a transformer LM with a
Python-float warm-up + cosine rate, clipping, a partial eval batch and a checkpoint resumed mid-run, a data-parallel
classifier on CPU:0 and CPU:1 with eager metrics gathered to the host, and a rate dropped on a validation plateau.

What is checked: every value a script read back to Python against jax's (jax 0.10.2 on the CPU, the same script text
and numpy data, recorded below); the resumed transformer against an uninterrupted one; and by counts, never times,
that an epoch after the first traces and compiles nothing, launches as many kernels as the one before, and leaves no
more live buffers behind (the interned scalar arguments of eager constants aside).
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

from bench import ported_scripts2 as ps2  # noqa: E402

JAX_LOGGED = {
    "gan": [
        {
            "d_loss": [1.6197254657745361, 1.616532564163208, 1.6361548900604248],
            "g_loss": [0.8153915405273438, 0.7926916480064392, 0.7426676750183105],
            "d_mean": [1.5959461530049641],
            "g_mean": [0.7818528016408285],
            "fixed_radius_mean": [0.5250097513198853],
            "fixed_radius_std": [0.20959964394569397],
            "fixed_first": [-0.07012712210416794],
        },
        {
            "d_loss": [1.5899587869644165, 1.5707324743270874, 1.6407243013381958],
            "g_loss": [0.7486313581466675, 0.7177904844284058, 0.704893946647644],
            "d_mean": [1.5707416534423828],
            "g_mean": [0.7151371637980143],
            "fixed_radius_mean": [0.41229248046875],
            "fixed_radius_std": [0.1386374980211258],
            "fixed_first": [-0.26011064648628235],
        },
        {
            "d_loss": [1.573125958442688, 1.5299503803253174, 1.5446970462799072],
            "g_loss": [0.685624361038208, 0.6786811947822571, 0.667465090751648],
            "d_mean": [1.5391418139139812],
            "g_mean": [0.674966017405192],
            "fixed_radius_mean": [0.3661472797393799],
            "fixed_radius_std": [0.12702293694019318],
            "fixed_first": [-0.3931156396865845],
        },
    ],
    "maml": [
        {
            "meta_loss": [1.4668421745300293, 2.694171905517578, 5.853972434997559],
            "test_before": [2.3335447311401367],
            "test_after": [1.6943037509918213],
            "test_improved": [3.0],
        },
        {
            "meta_loss": [0.8439897298812866, 3.1106033325195312, 0.9662076234817505],
            "test_before": [1.7230281829833984],
            "test_after": [1.4775397777557373],
            "test_improved": [2.0],
        },
        {
            "meta_loss": [3.3080854415893555, 7.299864768981934, 0.9475491642951965],
            "test_before": [1.5104879140853882],
            "test_after": [1.4418601989746094],
            "test_improved": [2.0],
        },
    ],
    "transformer": [
        {
            "loss": [3.7024989128112793, 3.5467963218688965, 3.278219223022461, 3.2307896614074707],
            "grad_norm": [2.7571024894714355, 3.2292158603668213, 2.0476887226104736, 1.8062185049057007],
            "perplexity": [22.81970171867707],
        },
        {
            "loss": [3.1585586071014404, 3.0792853832244873, 3.095020294189453, 2.9981119632720947],
            "grad_norm": [1.6977591514587402, 1.3755295276641846, 1.3222095966339111, 1.15902578830719],
            "perplexity": [21.061887993595324],
        },
        {
            "loss": [3.098330020904541, 3.025773763656616, 2.9274468421936035, 2.9244589805603027],
            "grad_norm": [1.1748669147491455, 1.279097318649292, 1.2233325242996216, 1.3740488290786743],
            "perplexity": [20.288560179559695],
        },
    ],
    "data_parallel": [
        {
            "loss": [1.6043884754180908, 1.18117356300354, 0.7073931097984314],
            "train_accuracy": [0.59375],
            "confusion_diagonal": [114.0],
            "eval_accuracy": [0.8428571428571429],
            "w1_norm": [4.241133213043213],
        },
        {
            "loss": [0.40685516595840454, 0.3863922357559204, 0.19361531734466553],
            "train_accuracy": [0.9270833333333334],
            "confusion_diagonal": [178.0],
            "eval_accuracy": [0.9142857142857143],
            "w1_norm": [4.500735759735107],
        },
        {
            "loss": [0.10658837109804153, 0.29424816370010376, 0.026363255456089973],
            "train_accuracy": [0.953125],
            "confusion_diagonal": [183.0],
            "eval_accuracy": [0.9571428571428572],
            "w1_norm": [4.767127513885498],
        },
    ],
    "plateau": [
        {"last_loss": [0.29360926151275635], "val_loss": [0.35789334774017334], "lr": [0.1]},
        {"last_loss": [0.22040782868862152], "val_loss": [0.33929330110549927], "lr": [0.1]},
        {"last_loss": [0.30443641543388367], "val_loss": [0.36930227279663086], "lr": [0.1]},
        {"last_loss": [0.22840923070907593], "val_loss": [0.30319932103157043], "lr": [0.1]},
        {"last_loss": [0.13319583237171173], "val_loss": [0.30095845460891724], "lr": [0.1]},
        {"last_loss": [0.20500263571739197], "val_loss": [0.31947749853134155], "lr": [0.1]},
        {"last_loss": [0.25466635823249817], "val_loss": [0.31481629610061646], "lr": [0.1]},
        {"last_loss": [0.18048331141471863], "val_loss": [0.2885107398033142], "lr": [0.03]},
        {"last_loss": [0.2563830316066742], "val_loss": [0.292439341545105], "lr": [0.03]},
        {"last_loss": [0.15574291348457336], "val_loss": [0.2929338216781616], "lr": [0.03]},
        {
            "last_loss": [0.1878328025341034],
            "val_loss": [0.289283812046051],
            "lr": [0.009],
            "best_val_loss": [0.2885107398033142],
        },
    ],
}


def _live_buffers() -> int:
    """Device buffers alive, the interned constant arguments aside."""
    gc.collect()
    interned = {id(b) for b in constants._interned}
    return sum(1 for k in list(buffers) if k not in interned)


def _run(name: str, ckpt: str, epochs: int = 0, **kw) -> tuple[list, list[tuple[int, int, int]], list[int]]:
    """The script's epochs (its own count, or `epochs`), and per epoch (traces, compiles, kernels) and the live
    buffers after it."""
    counts, live, out = [], [], []
    script = ps2.SCRIPTS[name](ps2.tgfx_lib(), True, ckpt, epochs, **kw)
    c = tg.counters
    while True:
        before = c.trace_count, c.compile_count, c.kernel_count
        try:
            out.append(next(script))
        except StopIteration:
            return out, counts, live
        counts.append((c.trace_count - before[0], c.compile_count - before[1], c.kernel_count - before[2]))
        live.append(_live_buffers())


@pytest.mark.parametrize("name", sorted(JAX_LOGGED))
def test_a_whole_script_logs_jax_s_values_and_its_later_epochs_cost_the_same(name, tmp_path):
    epochs, counts, _ = _run(name, str(tmp_path))
    assert len(epochs) == len(JAX_LOGGED[name])
    for i, (got, want) in enumerate(zip(epochs, JAX_LOGGED[name], strict=True)):
        assert got.logged.keys() == want.keys()
        for k, v in want.items():
            np.testing.assert_allclose(got.logged[k], v, rtol=1e-5, atol=1e-7, err_msg=f"{name}: epoch {i}: {k}")
    # the first epoch traces every jitted function; the later ones nothing (a new Python-float rate, new keys and
    # batches are arguments, not constants), and launch the same kernels: no retrace or recompile per value
    assert counts[0][0] > 0
    assert [c[:2] for c in counts[1:]] == [(0, 0)] * (len(counts) - 1), counts
    steady = counts[1:-1] if name == "plateau" else counts[1:]   # plateau's last epoch also evaluates its best params
    assert len({c[2] for c in steady}) == 1, counts


@pytest.mark.parametrize("name", sorted(JAX_LOGGED))
def test_an_epoch_leaves_no_more_live_buffers_than_the_one_before(name, tmp_path):
    """Five epochs: the later ones leave as many buffers alive as the one before (plateau's, as many more as its
    four params while the best params it keeps are not its current ones: after an epoch that did not improve)."""
    epochs, _, live = _run(name, str(tmp_path), epochs=5)
    assert len(epochs) == 5
    if name == "plateau":
        best, kept = float("inf"), []
        for e in epochs:
            val = e.logged["val_loss"][0]
            kept.append(0 if val < best - 1e-3 else 4)
            best = min(best, val) if val < best - 1e-3 else best
        live = [n - k for n, k in zip(live, kept, strict=True)]
    assert live[2:] == [live[2]] * (len(live) - 2), live


def test_the_transformer_resumed_from_its_checkpoint_logs_what_the_uninterrupted_run_logs(tmp_path):
    """Saved mid-epoch (params, Adam state with its int32 count, the dropout key) and read back by `tg.load` into
    freshly built jitted functions: every later value is bit for bit the uninterrupted run's."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    resumed, counts, _ = _run("transformer", str(tmp_path / "a"), resume=True)
    straight, _, _ = _run("transformer", str(tmp_path / "b"), resume=False)
    assert [e.logged for e in resumed] == [e.logged for e in straight]
    assert [c[:2] for c in counts[1:]] == [(0, 0)] * (len(counts) - 1)
    saved = tg.load(str(tmp_path / "a" / "transformer_tgfx.safetensors"))
    assert saved["opt"]["count"].dtype == tg.dtypes.int32 and int(saved["opt"]["count"]) == 4
    assert saved["key"].dtype == tg.dtypes.uint32



# ---- what these scripts found ----
def test_an_eager_op_on_sharded_values_lowers_its_per_device_graph_once(monkeypatch):
    """`data_parallel`'s eager metrics (`correct + jnp.sum(argmax(logits) == y)` on a sharded batch, `float` of a
    sharded sum) lowered their graph to per-device graphs again every step (the sharding rewrite, the all-reduce's
    ring): 0.48 ms an `add`, against 0.11 once the program is found by the graph's description. Each step's new
    buffers are read where they are: operands swapped, one operand used twice, a replicated value added to one on
    the default device."""
    import tgfx.lowering as lowering
    import tgfx.numpy as tnp
    lowered = []
    real = lowering.lower_multi
    monkeypatch.setattr(lowering, "lower_multi", lambda sink: lowered.append(1) or real(sink))
    devs = ("CPU:0", "CPU:1")
    rng = np.random.default_rng(0)
    correct, want = tnp.zeros(()), 0
    for i in range(6):
        a_np, b_np = rng.integers(-8, 8, (2, 8, 4)).astype(np.float32)
        a, b = tg.shard(a_np, devs, 0), tg.shard(b_np, devs, 0)
        x, y = (a, b) if i % 2 else (b, a)
        x_np, y_np = (a_np, b_np) if i % 2 else (b_np, a_np)
        np.testing.assert_array_equal((x - y).numpy(), x_np - y_np)
        np.testing.assert_array_equal((x * x).numpy(), x_np * x_np)
        assert float(tnp.sum(x)) == x_np.sum()
        correct = (correct + tnp.sum(tnp.argmax(x, axis=-1) == tnp.argmax(y, axis=-1))).block_until_ready()
        want += int(np.sum(x_np.argmax(-1) == y_np.argmax(-1)))
    assert float(correct) == want
    # one lowering per graph: x - y, x * x, sum(x), the metric's first add (onto a default-device zero) and its later
    # ones (onto the replicated total): the first step's, the second's first add, none after
    assert len(lowered) == 5, len(lowered)   # (24 before: four a step)


def test_a_draw_with_python_float_bounds_makes_no_tensor_of_them(monkeypatch):
    """`maml` draws its tasks eagerly every step (`uniform(k, shape, minval=0.1, maxval=5.0)`, four a step): each
    bound was made a Tensor only to check that it broadcasts, which a scalar always does (36 of the draw's 193
    Python calls; a float `p` of `bernoulli` likewise). The draws are those of Tensor bounds, bit for bit."""
    import tgfx.random as random
    made = []
    real = random._bound
    monkeypatch.setattr(random, "_bound", lambda *a: made.append(a[-1]) or real(*a))
    key = tg.random.PRNGKey(3)
    got = [tg.random.uniform(key, (4, 5, 1), minval=0.1, maxval=5), tg.random.uniform(key, (7,)),
           tg.random.bernoulli(key, 0.3, (6, 2)), tg.random.bernoulli(key, 0.7)]
    assert made == []
    f32 = tg.dtypes.float32
    want = [tg.random.uniform(key, (4, 5, 1), minval=tg.asarray(np.float32(0.1)), maxval=tg.asarray(np.float32(5))),
            tg.random.uniform(key, (7,), minval=tg.asarray(np.float32(0)), maxval=tg.asarray(np.float32(1))),
            tg.random.bernoulli(key, tg.Tensor.full((), 0.3, f32), (6, 2)),
            tg.random.bernoulli(key, tg.Tensor.full((), 0.7, f32))]
    for g, w in zip(got, want, strict=True):
        assert (g.dtype, g.shape) == (w.dtype, w.shape)
        np.testing.assert_array_equal(g.numpy(), w.numpy())
