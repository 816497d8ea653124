"""Compositions of transforms that JAX users write, each checked against the same composition taken apart: a vmap
against a Python loop over the examples, a forward-over-reverse Jacobian against reverse-over-reverse, a loop against
its unrolled steps. jax 0.10.2 agreed with tgfx on every case here (a differential run, tgfx session 24); with jax
installed the cases are also run through jax and compared value for value."""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp

RNG = np.random.default_rng(0)
XS = RNG.standard_normal((4, 5, 3)).astype(np.float32)
W = (RNG.standard_normal((3, 3)) * 0.5).astype(np.float32)
V = RNG.standard_normal((4, 3)).astype(np.float32)
P4 = np.float32([0.5, -1.0, 2.0, -0.2])


def _ns(mod: Any, np_: Any) -> SimpleNamespace:
    return SimpleNamespace(np=np_, lax=mod.lax, grad=mod.grad, vmap=mod.vmap, jacfwd=mod.jacfwd, jacrev=mod.jacrev,
                           jvp=mod.jvp, vjp=mod.vjp, checkpoint=mod.checkpoint, custom_vjp=mod.custom_vjp,
                           custom_jvp=mod.custom_jvp, hessian=mod.hessian)


def scan_loss(xp: Any, w: Any, xs: Any, unrolled: bool = False) -> Any:
    """A scan with a dict carry (and its Python unrolling)."""
    def step(c: dict, x: Any) -> tuple:
        h = xp.np.tanh(c["h"] @ w + x)
        return {"h": h, "s": c["s"] + (h * h).sum()}, h.sum()
    c = {"h": xp.np.zeros(3), "s": xp.np.zeros(())}
    if unrolled:
        ys = []
        for i in range(xs.shape[0]):
            c, y = step(c, xs[i])
            ys.append(y)
        return c["s"] + sum(ys) * 0.1
    c, ys = xp.lax.scan(step, c, xs)
    return c["s"] + ys.sum() * 0.1


def cond_loss(xp: Any, p: Any, x: Any) -> Any:
    return xp.lax.cond(p > 0, lambda x: xp.np.sin(x) * p, lambda x: xp.np.cos(x) * p * p, x).sum()


def switch_loss(xp: Any, p: Any, x: Any) -> Any:
    i = xp.np.clip((p * 2).astype(xp.np.int32), 0, 2)
    return xp.lax.switch(i, [lambda x: xp.np.sin(x), lambda x: x * x * p, lambda x: xp.np.exp(x) * p], x).sum()


def loop_sum(xp: Any, x: Any, kind: str) -> Any:
    body = lambda c: xp.np.sin(c) * x + c * 0.5  # noqa: E731
    if kind == "while":
        return xp.lax.while_loop(lambda c: c[1] < 4, lambda c: (body(c[0]), c[1] + 1), (x, 0))[0].sum()
    if kind == "fori":
        return xp.lax.fori_loop(0, 4, lambda i, c: body(c), x).sum()
    c = x
    for _ in range(4):
        c = body(c)
    return c.sum()


def custom_sin(xp: Any) -> Callable:
    @xp.custom_vjp
    def f(x: Any, y: Any) -> Any:
        return xp.np.sin(x) * y
    f.defvjp(lambda x, y: (xp.np.sin(x) * y, (x, y)), lambda r, g: (xp.np.cos(r[0]) * r[1] * g, xp.np.sin(r[0]) * g))
    return f


def per_example(f: Callable, *args: Any) -> Any:
    """f mapped over the leading axis by a Python loop: the reference for vmap."""
    outs = [f(*(a[i] for a in args)) for i in range(len(args[0]))]
    return tg.tree.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *outs)


# (id, composition(xp), the same taken apart with tgfx)
CASES: list[tuple[str, Callable[[Any], Any], Callable[[], Any]]] = [
    ("vmap-grad-scan-pytree-carry",
     lambda xp: xp.vmap(xp.grad(partial(scan_loss, xp)), in_axes=(None, 0))(W, XS),
     lambda: per_example(lambda xs: tg.grad(partial(scan_loss, TG, unrolled=True))(W, xs), XS)),
    ("vmap-grad-scan-both-batched",
     lambda xp: xp.vmap(xp.grad(partial(scan_loss, xp), argnums=(0, 1)))(np.stack([W, 2 * W, -W, W]), XS),
     lambda: per_example(lambda w, xs: tg.grad(partial(scan_loss, TG), argnums=(0, 1))(w, xs),
                         np.stack([W, 2 * W, -W, W]), XS)),
    ("jacfwd-jacfwd-while", lambda xp: xp.jacfwd(xp.jacfwd(partial(loop_sum, xp, kind="while")))(V[0]),
     lambda: tg.jacrev(tg.jacrev(partial(loop_sum, TG, kind="python")))(V[0])),
    ("jacfwd-jacrev-fori", lambda xp: xp.jacfwd(xp.jacrev(partial(loop_sum, xp, kind="fori")))(V[0]),
     lambda: tg.jacrev(tg.jacrev(partial(loop_sum, TG, kind="python")))(V[0])),
    ("jacrev-jacfwd-fori", lambda xp: xp.jacrev(xp.jacfwd(partial(loop_sum, xp, kind="fori")))(V[0]),
     lambda: tg.jacrev(tg.jacrev(partial(loop_sum, TG, kind="python")))(V[0])),
    ("vmap-grad-cond-batched-predicate", lambda xp: xp.vmap(xp.grad(partial(cond_loss, xp), argnums=(0, 1)))(P4, V),
     lambda: per_example(lambda p, x: tg.grad(partial(cond_loss, TG), argnums=(0, 1))(p, x), P4, V)),
    ("vmap-jacfwd-switch-batched-index",
     lambda xp: xp.vmap(xp.jacfwd(partial(switch_loss, xp), argnums=(0, 1)))(P4, V),
     lambda: per_example(lambda p, x: tg.grad(partial(switch_loss, TG), argnums=(0, 1))(p, x), P4, V)),
    ("grad-of-vmap-cond", lambda xp: xp.grad(lambda p, x: xp.vmap(partial(cond_loss, xp))(p, x).sum(),
                                             argnums=(0, 1))(P4, V),
     lambda: per_example(lambda p, x: tg.grad(partial(cond_loss, TG), argnums=(0, 1))(p, x), P4, V)),
    ("vmap-grad-checkpoint",
     lambda xp: xp.vmap(xp.grad(lambda x: xp.checkpoint(lambda v: xp.np.sin(xp.np.sin(v) @ W))(x).sum()))(V),
     lambda: per_example(lambda x: tg.grad(lambda v: tnp.sin(tnp.sin(v) @ W).sum())(x), V)),
    ("jvp-of-grad-checkpoint",
     lambda xp: xp.jvp(xp.grad(lambda x: xp.checkpoint(lambda v: xp.np.sin(xp.np.sin(v) @ W))(x).sum()),
                       (V[0],), (V[1],))[1],
     lambda: tg.hessian(lambda v: tnp.sin(tnp.sin(v) @ W).sum())(V[0]) @ V[1]),
    ("vmap-grad-custom_vjp", lambda xp: xp.vmap(xp.grad(lambda x, y: custom_sin(xp)(x, y).sum(), argnums=(0, 1)),
                                                in_axes=(0, None))(V, V[0]),
     lambda: per_example(lambda x: tg.grad(lambda x, y: (tnp.sin(x) * y).sum(), argnums=(0, 1))(x, V[0]), V)),
    ("jvp-of-vjp-custom_vjp", lambda xp: xp.jvp(lambda x: xp.vjp(custom_sin(xp), x, V[1])[1](V[2])[0],
                                                (V[0],), (V[3],))[1],
     lambda: -np.sin(V[0]) * V[1] * V[2] * V[3]),
]

TG = _ns(tg, tnp)


@pytest.mark.parametrize("name,case,ref", CASES, ids=[c[0] for c in CASES])
def test_composition_is_its_parts(name: str, case: Callable, ref: Callable) -> None:
    got = case(TG)
    for g, w in zip(tg.tree.tree_leaves(got), tg.tree.tree_leaves(ref()), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name,case,ref", CASES, ids=[c[0] for c in CASES])
def test_composition_answers_as_jax(name: str, case: Callable, ref: Callable) -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    want = case(_ns(jax, jnp))
    got = case(TG)
    for g, w in zip(tg.tree.tree_leaves(got), jax.tree.leaves(want), strict=True):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-5)
