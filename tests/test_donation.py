"""`jit(donate_argnums=...)` on steps whose kernels write several outputs at once: an optimizer's parameters and
moments, an EMA beside the parameters. Each output may be written into a donated input's buffer when every read of
that input in the kernel is at the output's offset and feeds the output's value (so it is read before it is
overwritten); a kernel of several stores was refused whole before, and an optimizer step donated only its count.

What is counted: which outputs took over which inputs' buffers (the program's `donated`), with the values checked
against numpy; never a clock."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.transforms.jit import DonatedBufferError


def rand(*shape: int, seed: int = 0) -> tg.Tensor:
    return tnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def donated(f: Any) -> dict[int, int]:
    ((prog, _),) = f._cache._d.values()
    return prog.donated


def buffer_id(x: tg.Tensor) -> int:
    x.block_until_ready()
    return x.uop.arg[0]


def test_an_ema_beside_the_params_is_updated_in_place() -> None:
    # one kernel stores p - 0.1 g and 0.9 ema + 0.1 p': each output reads its own input at its own offset
    @tg.jit(donate_argnums=(0, 1))
    def step(p: tg.Tensor, ema: tg.Tensor, g: tg.Tensor) -> tuple[tg.Tensor, tg.Tensor]:
        p = p - 0.1 * g
        return p, 0.9 * ema + 0.1 * p
    p, ema, g = rand(64), rand(64, seed=1), rand(64, seed=2)
    pn, en, gn = p.numpy(), ema.numpy(), g.numpy()
    ids = buffer_id(p), buffer_id(ema)
    p2, ema2 = step(p, ema, g)
    assert donated(step) == {0: 0, 1: 1}
    assert (buffer_id(p2), buffer_id(ema2)) == ids
    np.testing.assert_allclose(p2.numpy(), pn - 0.1 * gn, rtol=1e-6)
    np.testing.assert_allclose(ema2.numpy(), 0.9 * en + 0.1 * (pn - 0.1 * gn), rtol=1e-6)
    with pytest.raises(DonatedBufferError):
        p.numpy()


def test_an_output_goes_into_the_input_it_reads_not_one_another_output_reads() -> None:
    # (b * 2, a * 3) with both donated: b * 2 written into a's buffer would overwrite a before a * 3 reads it (the
    # kernel loads b, stores, then loads a); each output goes into the buffer of the input it reads
    f = tg.jit(lambda a, b: (b * 2, a * 3), donate_argnums=(0, 1))
    a, b = rand(32), rand(32, seed=1)
    an, bn = a.numpy(), b.numpy()
    x, y = f(a, b)
    np.testing.assert_allclose(x.numpy(), bn * 2, rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), an * 3, rtol=1e-6)
    assert donated(f) == {0: 1, 1: 0}
    # an input that only another output reads is not written by this one
    g = tg.jit(lambda a, b: (b * 2, a * b), donate_argnums=0)
    a, b = rand(32), rand(32, seed=1)
    an, bn = a.numpy(), b.numpy()
    x, y = g(a, b)
    np.testing.assert_allclose(x.numpy(), bn * 2, rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), an * bn, rtol=1e-6)
    assert donated(g) == {1: 0}


def test_an_optimizer_step_donates_its_params_and_state() -> None:
    opt = tg.optim.chain(tg.optim.clip_by_global_norm(1.0), tg.optim.adamw(1e-2, weight_decay=0.1))
    params = {"w": rand(8, 4), "b": rand(4, seed=1)}
    state = opt.init(params)

    @tg.jit(donate_argnums=(0, 1))
    def step(p: Any, st: Any, x: tg.Tensor) -> Any:
        loss, g = tg.value_and_grad(lambda p: ((x @ p["w"] + p["b"]) ** 2).mean())(p)
        updates, st = opt.update(g, st, p)
        return tg.optim.apply_updates(p, updates), st, loss

    @tg.jit
    def reference(p: Any, st: Any, x: tg.Tensor) -> Any:
        return step.f(p, st, x)
    x = rand(16, 8, seed=2)
    ref_p, ref_st = tg.tree.map(lambda a: a * 1, params), tg.tree.map(lambda a: a * 1, state)
    for _ in range(3):
        ref_p, ref_st, ref_loss = reference(ref_p, ref_st, x)
        params, state, loss = step(params, state, x)
        np.testing.assert_array_equal(loss.numpy(), ref_loss.numpy())
    for got, want in zip(tg.tree.leaves((params, state)), tg.tree.leaves((ref_p, ref_st)), strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    # inputs: b, w, the count, mu (b, w), nu (b, w), x. Every one but b is taken over by an output; b is read by the
    # loss's kernel, which the schedule places after the update's (b's buffer then cannot be written before it)
    assert sorted(donated(step).values()) == [1, 2, 3, 4, 5, 6]


def test_a_donating_step_replays_without_flattening_its_arguments_again(monkeypatch) -> None:
    # a jitted step with donate_argnums took the general path at every call (tree_flatten, a spec per leaf, the
    # signature's key): 4x the dispatch of the same step undonated (237 vs 56 us a call for 3 layers' params and
    # momenta) where jax's donating call costs what its other calls do. Its replay now starts from the fast path's
    # flattening, as every other call's
    import tgfx.transforms.jit as jit_module
    specs = []
    real = jit_module._leaf_spec
    monkeypatch.setattr(jit_module, "_leaf_spec", lambda *a, **k: specs.append(a[1]) or real(*a, **k))

    @tg.jit(donate_argnums=(0, 1))
    def step(p: Any, m: Any, g: Any, lr: float) -> Any:
        m = tg.tree.map(lambda m, g: 0.9 * m + g, m, g)
        return tg.tree.map(lambda p, m: p - lr * m, p, m), m
    p = [{"w": rand(8, 8, seed=i), "b": rand(8, seed=10 + i)} for i in range(2)]
    m = tg.tree.map(lambda a: a * 0, p)
    g = tg.tree.map(lambda a: a * 0 + 1, p)
    want_p, want_m = tg.tree.map(lambda a: a.numpy(), p), tg.tree.map(lambda a: a.numpy() * 0, p)
    for i in range(4):
        lr = 0.1 / (i + 1)   # (a Python float: a weak scalar leaf)
        old = p
        p, m = step(p, m, g, lr)
        if i == 0:
            assert len(donated(step)) == 8
            calls = len(specs)
        want_m = [{k: 0.9 * v + 1 for k, v in layer.items()} for layer in want_m]
        want_p = [{k: v - np.float32(lr) * want_m[j][k] for k, v in layer.items()} for j, layer in enumerate(want_p)]
        with pytest.raises(DonatedBufferError):   # the donated arguments are gone, on the fast path as before
            old[0]["w"].numpy()
    for got, want in zip(tg.tree.leaves((p, m)), tg.tree.leaves((want_p, want_m)), strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    assert len(specs) == calls   # the three later calls made no leaf spec (none of the general path's work)
    assert step.trace_count == 1
