"""The example programs in the style of JAX's examples/ learn: the VAE's loss falls, the GP's marginal likelihood
rises and its posterior mean follows the truth; each jitted training step is traced once and, after its first
call, replays without compiling anything (counts, never times). Only numpy and tgfx are needed: without
scikit-learn the VAE trains on its synthetic bars."""
from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

import numpy as np
import pytest

_EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, os.path.join(_EXAMPLES, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# a smaller model than the default: what is tested is that it learns and replays, at a test's cost
VAE_ARGS = ["--synthetic", "--hidden", "32", "--latent", "4", "--batch", "32", "--lr", "1e-2"]


def test_vae_learns_and_replays_one_trace(capsys: pytest.CaptureFixture) -> None:
    ex = _example("train_vae")
    run = ex.run(["--steps", "300", "--log-every", "10", *VAE_ARGS])
    out = capsys.readouterr().out
    first, last = run.losses[0], run.losses[-1]
    # random decoder weights give about 64 log 2 = 44 nats (plus the KL) per image; the bars need far fewer
    assert first > 40 and last < first - 10, run.losses  # 49 to 34 nats
    assert run.trace_count == 1 and run.compiles_after_first == 0, out
    assert "traced 1 time(s)" in out


def test_vae_main_returns_the_last_loss() -> None:
    ex = _example("train_vae")
    args = ["--steps", "4", "--log-every", "2", *VAE_ARGS]
    assert ex.main(args) == ex.run(args).losses[-1] > 0  # the same seed: the same numbers


def test_gp_fits_its_hyperparameters_and_predicts_the_truth(capsys: pytest.CaptureFixture) -> None:
    ex = _example("gaussian_process")
    fit = ex.run(["--steps", "120", "--log-every", "20", "--points", "24"])
    out = capsys.readouterr().out
    assert fit.nll[-1] < fit.nll[0] - 20, fit.nll
    assert fit.trace_count == 1 and fit.compiles_after_first == 0, out
    # the noise it fits is near the 0.1 the data were made with, and the posterior mean near sin(x)
    assert 0.05 < fit.params["noise"] < 0.2, fit.params
    inside = (fit.grid > 0.3) & (fit.grid < 2 * np.pi - 0.3)  # the ends have few samples beside them
    assert np.abs(fit.mean - fit.truth)[inside].max() < 0.15
    assert (fit.var > -1e-4).all() and fit.var.max() < 0.05
    args = ["--steps", "2", "--points", "8"]
    assert ex.main(args) == pytest.approx(ex.run(args).nll[-1])
