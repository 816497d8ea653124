"""Derivatives taken inside a collective's axis (`vmap(axis_name=)`, `pmap`, `shard_map`), as JAX's: forward mode
(jvp, jacfwd, linearize) through psum, pmean, all_gather, ppermute, psum_scatter and all_to_all (the tangent of a
collective is the collective of the examples' tangents), a cotangent or tangent that differs between the examples
(a vjp_fn's, a jvp's, a linearized function's: the batch of what it is bound to), nested axes, and the Jacobians of
a shard_map's replicated inputs (summed over the devices, as JAX's check_vma rules do).

The references are identities that hold in JAX: a derivative taken inside the axis is one taken outside, of the
whole batch's function (each example's tangent moving its own input, every example's cotangent pulled back together),
and the numbers jax 0.10.2 printed for the same programs, written out."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.sharding import Mesh
from tgfx.sharding import PartitionSpec as P

lax = tg.lax
X = np.arange(1.0, 7.0, dtype=np.float32).reshape(3, 2)
T = np.arange(6.0, dtype=np.float32).reshape(3, 2) * 0.5 - 1
X3 = np.arange(1.0, 13.0, dtype=np.float32).reshape(2, 3, 2) / 4
C3 = np.cos(np.arange(12.0, dtype=np.float32)).reshape(2, 3, 2)


def close(got: Any, want: Any) -> None:
    """Values (a tuple of them: each) equal to float32 rounding."""
    if isinstance(got, tuple):
        assert isinstance(want, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            close(g, w)
        return
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-5)


# one example's function, with a collective over "i" (3 examples) between nonlinear ops
PER_EXAMPLE: dict[str, Callable[[tg.Tensor], tg.Tensor]] = {
    "psum": lambda v: lax.psum(v * v, "i") * v,
    "pmean": lambda v: tnp.sin(v) * lax.pmean(v, "i"),
    "all_gather": lambda v: lax.all_gather(v ** 3, "i") * v,
    "all_gather-tiled": lambda v: lax.all_gather(tnp.sin(v), "i", tiled=True),
    "ppermute": lambda v: lax.ppermute(v * v, "i", [(0, 1), (1, 2), (2, 0)]) * v,
    "ppermute-partial": lambda v: lax.ppermute(tnp.exp(v / 4), "i", [(0, 2), (2, 1)]),
    "psum_scatter": lambda v: lax.psum_scatter(tnp.concatenate([v, v * v, v]), "i", tiled=True),
    "all_to_all": lambda v: lax.all_to_all(tnp.stack([v, v * v, tnp.sin(v)]), "i", 0, 0) * 2.0,
}


def batch_fn(f: Callable) -> Callable:
    """The whole batch's function: what a derivative outside the axis differentiates."""
    return tg.vmap(f, axis_name="i")


@pytest.mark.parametrize("name", list(PER_EXAMPLE))
def test_forward_mode_inside_the_axis_is_the_whole_batchs(name: str) -> None:
    """jvp, linearize and jacfwd taken inside vmap(axis_name=) through a collective raised NotImplementedError; now
    each example's tangent moves its own input, as JAX's: the jvp outside of the batch's function, row by row. jacfwd
    inside moves every example's input along the same basis vector: the outside Jacobian summed over the examples'
    inputs."""
    f = PER_EXAMPLE[name]
    want_y, want_t = tg.jvp(batch_fn(f), (X,), (T,))
    y, t = tg.vmap(lambda x, dx: tg.jvp(f, (x,), (dx,)), axis_name="i")(X, T)
    close((y, t), (want_y, want_t))
    close(tg.vmap(lambda x, dx: tg.linearize(f, x)[1](dx), axis_name="i")(X, T), want_t)
    jac = np.asarray(tg.jacrev(batch_fn(f))(X))              # (3, *out, 3, 2)
    inside = np.asarray(tg.vmap(tg.jacfwd(f), axis_name="i")(X))   # (3, *out, 2)
    close(inside, jac.sum(-2))


@pytest.mark.parametrize("name", list(PER_EXAMPLE))
def test_reverse_mode_with_each_examples_cotangent(name: str) -> None:
    """vjp_fn called inside the axis with a cotangent that differs between the examples: a collective's transpose
    read it as the same for all of them (psum's: 3 c_k for the sum of the c's), so the result was wrong. Now as the
    whole batch's vjp; and <vjp(c), t> = <c, jvp(t)> over the batch."""
    f = PER_EXAMPLE[name]
    y = batch_fn(f)(X)
    c = np.cos(np.arange(np.prod(y.shape), dtype=np.float32)).reshape(y.shape)
    (want,) = tg.vjp(batch_fn(f), X)[1](c)
    got = tg.vmap(lambda x, ct: tg.vjp(f, x)[1](ct)[0], axis_name="i")(X, c)
    close(got, want)
    _, t = tg.vmap(lambda x, dx: tg.jvp(f, (x,), (dx,)), axis_name="i")(X, T)
    np.testing.assert_allclose(float((np.asarray(got) * T).sum()), float((c * np.asarray(t)).sum()), rtol=1e-5)
    # jacrev inside: every example's cotangent the same basis vector, pulled back together
    jac = np.asarray(tg.jacrev(batch_fn(f))(X))
    close(tg.vmap(tg.jacrev(f), axis_name="i")(X), np.moveaxis(jac.sum(0), -2, 0))


def test_jax_values() -> None:
    """The numbers jax 0.10.2 gives for the same programs."""
    psum = tg.vmap(lambda x, t: tg.jvp(lambda v: lax.psum(v * v, "i"), (x,), (t,)), axis_name="i")(X, T)
    close(psum, (np.broadcast_to([35.0, 56.0], (3, 2)), np.broadcast_to([8.0, 20.0], (3, 2))))
    ring = tg.vmap(lambda x, t: tg.jvp(lambda v: lax.ppermute(v * v, "i", [(0, 1), (1, 2), (2, 0)]), (x,), (t,)),
                   axis_name="i")(X, T)
    close(ring[1], [[10.0, 18.0], [-2.0, -2.0], [0.0, 4.0]])
    fwd = tg.vmap(lambda x: tg.jacfwd(lambda v: lax.psum(v * v, "i") * v)(x), axis_name="i")(X)
    close(fwd, [np.diag([53.0, 104.0]), np.diag([89.0, 152.0]), np.diag([125.0, 200.0])])
    per_cot = tg.vmap(lambda x, c: tg.vjp(lambda v: lax.psum(v * v, "i"), x)[1](c)[0], axis_name="i")(X, T)
    close(per_cot, [[0.0, 6.0], [0.0, 12.0], [0.0, 18.0]])   # 2 x times the sum of the cotangents (it was 3 c_k)


NESTED: dict[str, Callable[[tg.Tensor], tg.Tensor]] = {
    "outer-psum": lambda v: lax.psum(v * v, "i") * v,
    "inner-psum": lambda v: lax.psum(v * v, "j") * v,
    "outer-ppermute": lambda v: lax.ppermute(v * v, "i", [(0, 1), (1, 0)]) * v,
    "outer-pmean": lambda v: lax.pmean(tnp.sin(v), "i") * v,
}


@pytest.mark.parametrize("name", list(NESTED))
def test_nested_axes(name: str) -> None:
    """A collective over the outer axis from inside an inner vmap, each example's tangent or cotangent its own over
    both axes: the stand-in's batch over the inner axis is batched over the outer one in turn."""
    f = NESTED[name]
    both = lambda g: tg.vmap(tg.vmap(g, axis_name="j"), axis_name="i")  # noqa: E731
    want_y, want_t = tg.jvp(both(f), (X3,), (C3,))
    close(both(lambda x, t: tg.jvp(f, (x,), (t,)))(X3, C3), (want_y, want_t))
    close(both(lambda x, t: tg.linearize(f, x)[1](t))(X3, C3), want_t)
    (want_c,) = tg.vjp(both(f), X3)[1](C3)
    close(both(lambda x, c: tg.vjp(f, x)[1](c)[0])(X3, C3), want_c)
    jac = np.asarray(tg.jacrev(both(f))(X3))   # (2, 3, 2, 2, 3, 2)
    close(both(tg.jacfwd(f))(X3), jac.sum((-3, -2)))
    close(both(tg.jacrev(f))(X3), np.moveaxis(jac.sum((0, 1)), 0, 2))


def test_forward_mode_through_a_vmap_inside_the_differentiated_function() -> None:
    """jvp, linearize and jacfwd, taken inside the named axis, of a function that vmaps over a collective: the inner
    vmap batches the collective's forward-mode node and runs its JVP per example in a vmap of its own, which read
    the node's input from a closure no longer bound (EscapedTracerError), and took its constant placeholder value
    as the same for every example (the tangents summed). As the whole batch's, and jax 0.10.2's."""
    f = lambda v: tg.vmap(lambda u: lax.psum(u * u, "i") * u)(v)  # noqa: E731
    both = lambda g: tg.vmap(tg.vmap(g, axis_name="j"), axis_name="i")  # noqa: E731
    per_row = lambda u: lax.psum(u * u, "i") * u  # noqa: E731
    want_y, want_t = tg.jvp(both(per_row), (X3,), (C3,))
    close(tg.vmap(lambda x, t: tg.jvp(f, (x,), (t,)), axis_name="i")(X3, C3), (want_y, want_t))
    close(tg.vmap(lambda x, t: tg.linearize(f, x)[1](t), axis_name="i")(X3, C3), want_t)
    np.testing.assert_allclose(np.asarray(want_y)[0, 0], [0.78125, 2.125], rtol=1e-6)
    jac = np.asarray(tg.jacrev(both(per_row))(X3))   # (2, 3, 2, 2, 3, 2): every example moving together, by i
    close(tg.vmap(tg.jacfwd(f), axis_name="i")(X3), jac.sum(3))


def test_a_cotangent_that_differs_only_over_the_inner_axis() -> None:
    """The collective's input the same for every example of the inner axis (in_axes None there), the cotangent or
    tangent not: each inner example reads its own row (all read row 0 before, jax 0.10.2's values)."""
    w = np.float32([[1.0, 2.0], [3.0, 4.0]])
    both = lambda g: tg.vmap(tg.vmap(g, in_axes=(None, 0), axis_name="j"), axis_name="i")  # noqa: E731
    got = both(lambda x, c: tg.vjp(lambda v: lax.psum(v * v, "i"), x)[1](c)[0])(w, C3)
    close(got, 2 * w[:, None, :] * C3.sum(0))
    np.testing.assert_allclose(got[0].numpy(), [[3.9203, 5.1768], [-1.1233, -7.6045], [-2.9854, 1.1524]], atol=1e-4)
    tangent = both(lambda x, t: tg.jvp(lambda v: lax.psum(v * v, "i"), (x,), (t,))[1])(w, C3)
    close(tangent, np.broadcast_to((2 * w[:, None, :] * C3).sum(0), C3.shape))


# ---- shard_map ----
def randn(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture
def mesh2d() -> Mesh:
    with tg.Context(TGFX_CPU_DEVICES=4):
        return Mesh(np.array(tg.devices("cpu")).reshape(2, 2), ("data", "model"))


def test_derivatives_inside_a_dp_tp_shard_map(mesh2d: Mesh) -> None:
    """dp x tp: the loss psum'd over "model" and pmean'd over "data". Its jvp and linearize inside the shard_map
    are the one-device jvp (they raised NotImplementedError); jacrev with respect to the "model" blocks of v is the
    one-device gradient's blocks (the blocks were not summed over "data", and the basis was made on one device:
    ShardingError); jacfwd moves every device's block along the same basis vector: the sum of the gradient's blocks
    on each device, as jax 0.10.2 gives ([1.408, -1.927] twice)."""
    a, w, v = randn(8, 6), randn(6, 4, seed=1), randn(4, seed=2)
    tw, tv = randn(6, 4, seed=3), randn(4, seed=4)
    one = lambda x, w_, v_: tnp.mean((tnp.tanh(x @ w_) @ v_) ** 2)  # noqa: E731
    value, tangent = tg.jvp(lambda w_, v_: one(a, w_, v_), (w, v), (tw, tv))
    gv = tg.grad(one, argnums=2)(a, w, v).numpy()

    def local(x: tg.Tensor, w_: tg.Tensor, v_: tg.Tensor) -> tg.Tensor:
        return lax.pmean(tnp.mean(lax.psum(tnp.tanh(x @ w_) @ v_, "model") ** 2), "data")

    def sm(f: Callable, out_specs: Any) -> Any:
        return tg.shard_map(f, mesh=mesh2d, out_specs=out_specs,
                            in_specs=(P("data", None), P(None, "model"), P("model"), P(None, "model"), P("model")))(
                                a, w, v, tw, tv)
    got = sm(lambda xb, wb, vb, twb, tvb: tg.jvp(lambda w_, v_: local(xb, w_, v_), (wb, vb), (twb, tvb)), (P(), P()))
    close(got, (value, tangent))
    lin = sm(lambda xb, wb, vb, twb, tvb: tg.linearize(lambda w_, v_: local(xb, w_, v_), wb, vb)[1](twb, tvb), P())
    close(lin, tangent)
    close(sm(lambda xb, wb, vb, *_: tg.jacrev(local, argnums=2)(xb, wb, vb), P("model")), gv)
    folded = gv[:2] + gv[2:]
    close(sm(lambda xb, wb, vb, *_: tg.jacfwd(local, argnums=2)(xb, wb, vb), P("model")), np.tile(folded, 2))


def test_jacobians_of_replicated_inputs_inside_shard_map() -> None:
    """A weight every device holds whole (P()) and rows split over "data": jacrev inside the shard_map sums the
    devices' Jacobians of the weight, as grad and vjp did and JAX's check_vma does (jax 0.10.2's values)."""
    with tg.Context(TGFX_CPU_DEVICES=2):
        mesh = Mesh(np.array(tg.devices("cpu")[:2]), ("d",))
    x, w = randn(4, 3), randn(3, seed=1)

    def loss(xb: tg.Tensor, w_: tg.Tensor) -> tg.Tensor:
        return lax.psum(tnp.sum(tnp.tanh(xb @ w_) ** 2), "d")

    def sm(f: Callable, out_specs: Any) -> Any:
        return tg.shard_map(f, mesh=mesh, in_specs=(P("d"), P()), out_specs=out_specs)(x, w)
    g = tg.grad(lambda w_: tnp.sum(tnp.tanh(x @ w_) ** 2))(w).numpy()
    close(sm(lambda xb, w_: tg.jacrev(loss, argnums=1)(xb, w_), P()), g)
    close(sm(lambda xb, w_: tg.jacfwd(loss, argnums=1)(xb, w_), P()), g)
    close(sm(lambda xb, w_: tg.grad(loss, argnums=1)(xb, w_), P()), g)
    # a result each device has its own rows of: the weight's Jacobian is still summed over the devices
    rows = tg.jacrev(lambda w_: tnp.tanh(x @ w_))(w).numpy()
    close(sm(lambda xb, w_: tg.jacrev(lambda u: tnp.tanh(xb @ u))(w_), P("d")), np.tile(rows[:2] + rows[2:], (2, 1)))
