"""Committed and uncommitted Tensors (`tgfx/placement.py`, JAX's rule): a Tensor made without a device (`tg.asarray`,
`tnp.zeros`, `tg.random.key` / `split`, an op of such values) is uncommitted and goes where its committed partners
are (replicated over a sharded Tensor's devices), eagerly and under `jit`; one placed by the user (`device_put`,
`shard`, `x.to`, `device=`) or computed from one is committed, and two committed operands on different placements
are an error naming both."""
import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.devices import DEFAULT_DEVICE

D2 = ("CPU:0", "CPU:1")
rng = np.random.default_rng(0)


def randn(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# ---- which Tensors are committed ----
def test_what_is_committed() -> None:
    a = randn(4, 2)
    u = tg.asarray(a)
    assert not u.committed and not (u * 2 + 1).committed and not tnp.zeros(3).committed
    assert not tg.random.key(0).committed and not any(k.committed for k in tg.random.split(tg.random.key(0)))
    assert not tg.device_put(a).committed and tg.device_put(u) is u   # no device: host data uncommitted, a Tensor as is
    c = tg.device_put(u, "CPU:0")
    assert c.committed and not u.committed   # (put, not marked: u itself stays uncommitted, as JAX's argument)
    assert tg.asarray(c) is c and tg.device_put(c) is c and c.to("CPU:0") is c
    assert (c * 2).committed and (u + c).committed and (c * 2).realize().committed   # computed from it
    assert tg.device_put(a, "CPU:0").committed and u.to("CPU:0").committed and u.to("CPU:1").committed
    assert tnp.asarray(a, device="CPU:0").committed and tnp.zeros(3, device="CPU:0").committed
    assert tg.shard(a, D2, axis=0).committed and tg.shard(a, D2).committed
    assert c.device == "CPU:0" and u.device == DEFAULT_DEVICE   # (on the CPU: where it lies is the same; only what
    # moves differs)
    assert tnp.zeros_like(c).committed and not tnp.zeros_like(u).committed
    k = tg.device_put(tg.random.key(1), "CPU:0").realize()
    assert all(r.committed for r in tg.random.split(k)) and all(r.committed for r in k.reshape(1, -1))


def test_like_functions_follow_a_sharded_argument() -> None:
    """`zeros_like` of a sharded parameter is laid out as it is (an optimizer's moments), as JAX's."""
    for axis in (None, 0, 1):
        p = tg.shard(randn(4, 6), D2, axis=axis)
        z = tnp.zeros_like(p)
        assert tg.sharding(z) == (D2, axis) and z.committed
        np.testing.assert_array_equal(z.numpy(), np.zeros((4, 6), np.float32))
        assert tg.sharding(tnp.ones_like(p)) == (D2, axis)
        assert tg.sharding(tnp.full_like(p, 2.0)) == (D2, axis)


# ---- eager ops ----
@pytest.mark.parametrize("axis", [None, 0])
def test_eager_uncommitted_operand_goes_to_the_sharded_one(axis: int | None) -> None:
    a, b, m = randn(4, 6), randn(6), randn(6, 3)
    s, u = tg.shard(a, D2, axis=axis), tg.asarray(b)
    cases = [(lambda x, y: x + y, lambda x, y: x + y, (s, u), (a, b)),
             (lambda x, y: x * y, lambda x, y: x * y, (u, s), (b, a)),
             (lambda x, y: x @ y, lambda x, y: x @ y, (s, tg.asarray(m)), (a, m)),
             (lambda x, y: x @ y, lambda x, y: x @ y, (tg.asarray(m.T), s.T), (m.T, a.T)),
             (lambda x, y: tnp.where(y > 0, x, 0.0), lambda x, y: np.where(y > 0, x, 0.0), (s, u), (a, b)),
             (lambda x, y: tnp.concatenate([x, y[None]]), lambda x, y: np.concatenate([x, y[None]]), (s, u), (a, b)),
             (lambda x, y: tnp.concatenate([y[None], x]), lambda x, y: np.concatenate([y[None], x]), (s, u), (a, b))]
    for f, ref, args, host in cases:
        out = f(*args)
        assert out.device == D2 and out.committed
        np.testing.assert_allclose(out.numpy(), ref(*host), rtol=1e-5, atol=1e-6)
    assert tg.sharding(s + u) == (D2, axis) and tg.sharding(u - s) == (D2, axis)
    assert tg.sharding(u * 2).__class__ is type(None) and (u * 2).device == DEFAULT_DEVICE   # u stays where it was


def test_eager_weak_scalar_tensor_stays_weak_when_moved() -> None:
    s = tg.shard(np.ones((2, 2), np.float16), D2, axis=0)
    lr = tnp.asarray(0.5)   # a weakly typed scalar, uncommitted
    out = s * lr
    assert out.dtype == tnp.float16 and out.device == D2
    np.testing.assert_array_equal(out.numpy(), np.full((2, 2), 0.5, np.float16))


def test_uncommitted_goes_to_a_committed_device() -> None:
    a, b = randn(5), randn(5)
    x1, u = tg.device_put(a, "CPU:1"), tg.asarray(b)
    for out in (x1 + u, u + x1, tnp.stack([u, x1])):
        assert out.device == "CPU:1"
    np.testing.assert_allclose((u * x1).numpy(), b * a, rtol=1e-6)


def test_two_committed_operands_on_different_placements_raise() -> None:
    a = randn(4, 2)
    s = tg.shard(a, D2, axis=0)
    c0, c1 = tg.device_put(a, "CPU:0"), tg.device_put(a, "CPU:1")
    fix = r"; put one where the other is with tg.device_put\(x, device\) or tg.shard\(x, devices, axis\)"
    with pytest.raises(ValueError, match=r"add: operands are committed to different devices: float32\[4, 2\] sharded "
                                         r"along axis 0 on \('CPU:0', 'CPU:1'\) and float32\[4, 2\] on CPU:0" + fix):
        _ = s + c0
    with pytest.raises(ValueError, match=r"committed to different devices: float32\[4, 2\] on CPU:0 and "
                                         r"float32\[4, 2\] on CPU:1" + fix):
        _ = c0 * c1
    derived = (c0 * 2).realize()   # computed from a committed value, and computed: still committed
    with pytest.raises(ValueError, match="committed to different devices"):
        _ = derived + s
    with pytest.raises(ValueError, match="committed to different devices"):
        tnp.concatenate([s, c0])
    np.testing.assert_allclose((s + tg.device_put(a, D2)).numpy(), 2 * a)   # the same placement: fine


# ---- jit ----
def test_jit_replicates_an_uncommitted_argument_beside_sharded_ones() -> None:
    """In both argument orders, with a new uncommitted value every call: one trace, no compile after the first call,
    values as numpy's; a committed argument of the same value raises (JAX's jit does), and does not touch the cache."""
    a = randn(4, 6)
    s = tg.shard(a, D2, axis=0)
    f = tg.jit(lambda x, y: x * y + 1)
    for k in range(4):
        b = randn(6)
        u = tg.asarray(b)
        if k == 2:
            tg.counters.reset()
        out, out2 = f(s, u), f(u, s)
        for o in (out, out2):
            np.testing.assert_allclose(o.numpy(), a * b + 1, rtol=1e-6)
            assert tg.sharding(o) == (D2, 0) and o.committed
        assert not u.committed and u.device == DEFAULT_DEVICE
    assert f.trace_count == 2 and tg.counters.compile_count == 0
    c = tg.device_put(randn(6), "CPU:0")
    with pytest.raises(ValueError, match=r"jit\(.*<lambda>\): arguments are committed to different devices: float32"
                                         r"\[4, 6\] sharded along axis 0 on \('CPU:0', 'CPU:1'\) and float32\[6\] on "
                                         r"CPU:0"):
        f(s, c)
    assert f.trace_count == 2
    np.testing.assert_allclose(f(s, tg.asarray(np.ones(6, np.float32))).numpy(), a + 1, rtol=1e-6)
    assert f.trace_count == 2


def test_jit_same_uncommitted_tensor_passed_twice() -> None:
    a, b = randn(4, 2), randn(2)
    s, u = tg.shard(a, D2, axis=0), tg.asarray(b)
    f = tg.jit(lambda x, y, z: x * y - z)
    out = f(s, u, u)
    np.testing.assert_allclose(out.numpy(), a * b - b, rtol=1e-6)
    g = tg.jit(lambda x, y: (x * y, y * 2))
    o, twice = g(s, u)
    assert tg.sharding(twice) == (D2, None)   # a result of the replicated argument: replicated, committed
    np.testing.assert_allclose(twice.numpy(), 2 * b, rtol=1e-6)
    np.testing.assert_allclose(f(s, s, u).numpy(), a * a - b, rtol=1e-6)


def test_jit_donation_beside_an_uncommitted_argument() -> None:
    """Donating the sharded argument of a call that moves an uncommitted one: the donated Tensor is consumed, the
    results right; donating the uncommitted one donates its replicated copy."""
    a, b = randn(4, 2), randn(2)
    f = tg.jit(lambda x, y: (x + y, y * 3), donate_argnums=(0,))
    s, u = tg.shard(a, D2, axis=0), tg.asarray(b)
    out, y3 = f(s, u)
    np.testing.assert_allclose(out.numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose(y3.numpy(), 3 * b, rtol=1e-6)
    with pytest.raises(RuntimeError, match="donated"):
        s.numpy()
    g = tg.jit(lambda x, y: x * y, donate_argnums=(1,))
    s = tg.shard(a, D2, axis=0)
    for _ in range(2):
        np.testing.assert_allclose(g(s, tg.asarray(b)).numpy(), a * b, rtol=1e-6)


def test_jit_uncommitted_beside_a_committed_device() -> None:
    a, b = randn(5), randn(5)
    f = tg.jit(lambda x, y: x * y)
    x1 = tg.device_put(a, "CPU:1")
    for args in ((x1, tg.asarray(b)), (tg.asarray(b), x1)):
        out = f(*args)
        assert out.device == "CPU:1"
        np.testing.assert_allclose(out.numpy(), a * b, rtol=1e-6)
    c0 = tg.device_put(a, "CPU:0")
    assert f(c0, tg.asarray(b)).committed and not f(tg.asarray(a), tg.asarray(b)).committed


def test_a_recycled_result_is_committed_only_by_its_own_arguments() -> None:
    """A jitted call's result node comes back as the result of the call after next once nothing holds it
    (`Program._reuse`): computed from an uncommitted argument it is uncommitted, whatever the call that first made it
    was given (it stayed committed when that call's argument was)."""
    f = tg.jit(lambda x: x * 2)
    a = randn(4)
    c = tg.device_put(a, "CPU:0")
    assert f(c).committed
    u = tg.asarray(a)
    for _ in range(4):
        out = f(u)
        assert not out.committed
        np.testing.assert_allclose(out.numpy(), a * 2, rtol=1e-6)
        del out
    assert f(c).committed and not f(u).committed


# ---- a data-parallel training loop as users write it ----
def _mlp_init() -> dict:
    r = np.random.default_rng(1)
    return {"w1": (r.standard_normal((8, 16)) / 3).astype(np.float32), "b1": np.zeros(16, np.float32),
            "w2": (r.standard_normal((16, 4)) / 4).astype(np.float32), "b2": np.zeros(4, np.float32)}


def _loss(p: dict, key: tg.Tensor, x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    h = tnp.tanh(x @ p["w1"] + p["b1"])
    keep = tg.random.uniform(key, h.shape) >= 0.25   # dropout from a key split every step
    h = tnp.where(keep, h / 0.75, 0.0)
    return ((h @ p["w2"] + p["b2"] - y) ** 2).mean()


def _train(params: dict, xs: tg.Tensor, ys: tg.Tensor, steps: int = 4) -> list[float]:
    opt = tg.optim.adam(1e-2)
    state = opt.init(params)   # its step count: tnp.zeros, uncommitted

    @tg.jit
    def step(p: dict, st: object, key: tg.Tensor, x: tg.Tensor, y: tg.Tensor, lr: tg.Tensor) -> tuple:
        value, g = tg.value_and_grad(_loss)(p, key, x, y)
        updates, st = opt.update(g, st, p)
        return tg.tree.map(lambda a, b: a + lr * b, p, updates), st, value

    key, losses = tg.random.key(0), []
    for i in range(steps):
        key, sub = tg.random.split(key)                # uncommitted, eagerly every step
        lr = tnp.asarray(1.0 / (1 + i))                # a Python float's scalar: uncommitted, weakly typed
        params, state, value = step(params, state, sub, xs, ys, lr)
        losses.append(float(value))
    assert step.trace_count <= 2   # (the first call's state is one-device constants, later ones the step's results)
    return losses


def test_data_parallel_training_with_uncommitted_keys_counts_and_rates() -> None:
    p0 = _mlp_init()
    x, y = randn(16, 8), randn(16, 4)
    want = _train(tg.tree.map(tg.asarray, p0), tg.asarray(x), tg.asarray(y))
    params = tg.tree.map(lambda a: tg.shard(a, D2), p0)
    got = _train(params, tg.shard(x, D2, axis=0), tg.shard(y, D2, axis=0))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert len(set(got)) == len(got)   # (it trains: each step's loss differs)


def test_eager_data_parallel_step_with_uncommitted_state() -> None:
    """The same, eagerly: Adam's count, the key and the rate meet sharded values in ordinary ops."""
    p0 = _mlp_init()
    x, y = randn(16, 8), randn(16, 4)
    opt = tg.optim.adam(1e-2)

    def run(params: dict, xs: tg.Tensor, ys: tg.Tensor) -> list[float]:
        state, key, out = opt.init(params), tg.random.key(3), []
        for _ in range(2):
            key, sub = tg.random.split(key)
            value, g = tg.value_and_grad(_loss)(params, sub, xs, ys)
            updates, state = opt.update(g, state, params)
            params = tg.optim.apply_updates(params, updates)
            out.append(float(value))
        assert not state.count.committed and state.count.device == DEFAULT_DEVICE   # (it met no sharded value: JAX too)
        return out
    want = run(tg.tree.map(tg.asarray, p0), tg.asarray(x), tg.asarray(y))
    got = run(tg.tree.map(lambda a: tg.shard(a, D2), p0), tg.shard(x, D2, axis=0), tg.shard(y, D2, axis=0))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
