"""Programs as users write them: training loops with schedules, step counters and eager key splitting.

What is asserted is cost by counts: a step at 1,000 compiles, traces and schedules exactly what a step at 3 does
(JAX compiles per shape and dtype, never per value, and its eager values never grow a graph).
"""
import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp


def _loss(params, x, y):
    pred = x @ params["w"] + params["b"]
    return ((pred - y) ** 2).mean()


@tg.jit
def _sgd_step(params, x, y, lr):
    loss, g = tg.value_and_grad(_loss)(params, x, y)
    return tg.tree.tree_map(lambda p, d: p - lr * d, params, g), loss


def test_a_thousand_eager_steps_cost_the_same_as_the_third():
    w_true = tg.asarray(np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32))
    params = {"w": tnp.zeros((4, 1)), "b": tnp.zeros((1,))}
    key = tg.random.key(0)
    per_step, losses = [], []
    for step in range(1000):
        before = (tg.counters.compile_count, tg.counters.trace_count, tg.counters.uop_count,
                  tg.counters.schedule_count)
        lr = 0.1 * 0.999 ** step                           # a schedule: a new Python float every step
        key, sub = tg.random.split(key)                    # the JAX idiom: the old key is never read again
        x = tg.random.normal(tg.random.fold_in(sub, step), (32, 4))
        noise = tg.random.uniform(sub, (32, 1), minval=-0.01, maxval=0.01)
        y = x @ w_true + noise                             # eager code between jitted steps
        params, loss = _sgd_step(params, x, y, lr)
        params["w"] = params["w"] * (1.0 - 1e-4 * lr)      # eager weight decay with this step's value
        if step % 100 == 0:
            losses.append(loss.item())
        after = (tg.counters.compile_count, tg.counters.trace_count, tg.counters.uop_count,
                 tg.counters.schedule_count)
        per_step.append(tuple(b - a for a, b in zip(before, after, strict=True)))
    compiles, traces, uops, schedules = zip(*per_step[3:], strict=True)
    assert sum(compiles) == 0 and sum(traces) == 0 and sum(schedules) == 0
    assert len(set(uops)) == 1, f"UOps scheduled per step vary: {sorted(set(uops))}"
    assert _sgd_step.trace_count == 1
    assert losses[-1] < 1e-3 < losses[0]
    np.testing.assert_allclose(params["w"].numpy()[:, 0], [1.0, -2.0, 0.5, 3.0], atol=0.02)


def test_eager_ops_compile_once_for_every_constant_value():
    x = tg.asarray(np.arange(8, dtype=np.float32))
    (x * 0.5 + 2.5).numpy()
    tg.counters.reset()
    for i in range(20):
        c = 0.1 * i + 0.05
        np.testing.assert_allclose((x * c + 2 * c).numpy(), np.arange(8, dtype=np.float32) * c + 2 * c, rtol=1e-6)
    assert tg.counters.compile_count == 0 and tg.counters.schedule_count <= 1


def test_eager_integer_constants_are_arguments_too():
    n = tg.asarray(np.arange(6, dtype=np.int32))
    assert ((n * 7) % 5).tolist() == [0, 2, 4, 1, 3, 0]
    tg.counters.reset()
    for k in range(3, 13):
        assert ((n * k) % 5).tolist() == [(i * k) % 5 for i in range(6)]
    assert tg.counters.compile_count == 0


def test_a_scalar_result_is_its_interned_buffer_and_donation_copies_it():
    a = tnp.full((), 3.25)               # a scalar constant: its value is an interned argument buffer
    assert a.item() == 3.25

    @tg.jit(donate_argnums=0)
    def bump(v):
        return v + 1.0
    assert bump(a).item() == 4.25
    b = tnp.full((), 3.25)               # the interned 3.25 was not overwritten by the donated call
    assert b.item() == 3.25


def test_random_key_loop_does_not_grow():
    key = tg.random.key(1)
    sizes = []
    for _ in range(30):
        tg.counters.reset()
        key, sub = tg.random.split(key)
        tg.random.normal(sub, (3,)).numpy()
        sizes.append(tg.counters.uop_count)
    assert len(set(sizes[2:])) == 1
    # and the stream is JAX's: the same keys as splitting one at a time on the host
    k = tg.random.key(1)
    for _ in range(30):
        k = tg.random.split(k)[0]
    assert key.tolist() == k.tolist()


def test_siblings_of_a_realised_value_are_realised_with_it():
    x = tg.asarray(np.arange(4, dtype=np.float32))
    both = tnp.exp(x) * 2.0
    first, second = both[:2], both[2:]
    first.numpy()
    assert tg.realize(second)[0].op in (tg.Ops.BUFFER, tg.Ops.RESHAPE)
    assert second.uop.op is tg.Ops.BUFFER or second.uop.src[0].op is tg.Ops.BUFFER
    np.testing.assert_allclose(second.numpy(), np.exp([2.0, 3.0]) * 2, rtol=1e-6)


# ---- jit with Python scalars and numpy arrays ----
def test_jit_traces_python_scalars_once_for_all_values():
    f = tg.jit(lambda x, lr: x * lr)
    x = tg.asarray(np.ones(3, np.float32))
    for lr in (0.1, 0.2, 0.3, 4.0):
        np.testing.assert_allclose(f(x, lr).numpy(), [lr] * 3, rtol=1e-6)
    assert f.trace_count == 1
    g = tg.jit(lambda x, n: x + n)
    assert g(x, 2).tolist() == [3.0] * 3 and g(x, 5).tolist() == [6.0] * 3 and g.trace_count == 1


def test_jit_static_argnums_keeps_value_specialisation():
    f = tg.jit(lambda x, n: x * n, static_argnums=1)
    x = tg.asarray(np.ones(2, np.float32))
    f(x, 2.0)
    f(x, 3.0)
    assert f.trace_count == 2


def test_jit_python_scalar_is_weakly_typed():
    f = tg.jit(lambda x, s: x * s)
    xb = tg.asarray(np.ones(2, np.float32)).astype(tg.dtypes.bfloat16)
    assert f(xb, 0.5).dtype == tg.dtypes.bfloat16           # as jnp: the Python float takes the array's type
    xi = tg.asarray(np.array([1, 2], np.int8))
    g = tg.jit(lambda x, k: x + k)
    assert g(xi, 3).dtype == tg.dtypes.int8 and g(xi, 3).tolist() == [4, 5]
    h = tg.jit(lambda a, b: a * b)                           # both weak: the default float
    assert h(2.0, 3.0).dtype == tg.dtypes.float32 and h(2.0, 3.0).item() == 6.0


def test_jit_python_scalar_is_traced_so_python_control_flow_on_it_is_an_error():
    def f(x, n):
        return x * 2 if n > 1 else x
    with pytest.raises(tg.ConcretizationError):
        tg.jit(f)(tg.asarray(np.ones(2, np.float32)), 3)
    assert tg.jit(f, static_argnums=1)(tg.asarray(np.ones(2, np.float32)), 3).tolist() == [2.0, 2.0]


def test_jit_python_int_out_of_int32_range_names_the_argument():
    f = tg.jit(lambda x, n: x + n)
    with pytest.raises(OverflowError, match="int32"):
        f(tg.asarray(np.ones(2, np.float32)), 1 << 40)


def test_jit_numpy_arrays_share_the_trace_of_tensors():
    f = tg.jit(lambda x: x * 2)
    a = np.arange(3, dtype=np.float32)
    assert f(tg.asarray(a)).tolist() == [0.0, 2.0, 4.0]
    assert f(a).tolist() == [0.0, 2.0, 4.0]
    assert f(np.float32(3.0)).item() == 6.0 and f(tg.asarray(np.float32(2.0))).item() == 4.0
    assert f.trace_count == 2   # one per shape


def test_eager_optimizer_state_does_not_chain_across_steps():
    # the optimiser's state is part of the new parameters' graph and held by the user: it is computed with them, so
    # the next step starts from buffers, not from a graph of every step before
    params = {"w": tg.asarray(np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)),
              "b": tnp.zeros(8)}
    x = tg.asarray(np.random.default_rng(1).standard_normal((32, 16)).astype(np.float32))
    opt = tg.optim.adam(1e-2)
    state = opt.init(params)
    loss_grad = tg.jit(tg.value_and_grad(lambda p: ((x @ p["w"] + p["b"]) ** 2).mean()))
    per_step, losses = [], []
    for _ in range(12):
        before = (tg.counters.compile_count, tg.counters.uop_count, tg.counters.kernel_count)
        loss, g = loss_grad(params)
        updates, state = opt.update(g, state, params)
        params = tg.optim.apply_updates(params, updates)
        losses.append(loss.item())
        per_step.append(tuple(b - a for a, b in zip(before, (tg.counters.compile_count, tg.counters.uop_count,
                                                             tg.counters.kernel_count), strict=True)))
    assert all(c == 0 for c, _, _ in per_step[3:])
    assert len({u for _, u, _ in per_step[3:]}) == 1 and len({k for _, _, k in per_step[3:]}) == 1
    assert losses[-1] < losses[0]


def test_eager_steps_from_several_threads_get_their_own_values():
    # one eager program and one pool of interned constants serve every thread: each must see its own scalars
    from helpers import run_threads
    x = tg.asarray(np.arange(8, dtype=np.float32))
    (x * 3.0 + 1.0).numpy()
    wrong: list[tuple[int, object]] = []

    def worker(t: int) -> None:
        try:
            key = tg.random.key(t)
            for i in range(100):
                c = t + i / 128
                if (x * c + 1.0).tolist() != [float(np.float32(v * np.float32(c)) + 1) for v in range(8)]:
                    wrong.append((t, i))
                key, sub = tg.random.split(key)
        except Exception as e:  # noqa: BLE001 - a thread's failure is this test's
            wrong.append((t, repr(e)))
    finished = run_threads(worker, 4, switch_interval=1e-5, timeout=120)
    assert not wrong and finished


def test_block_until_ready_takes_a_pytree_and_computes_its_lazy_leaves_in_one_schedule():
    a = tnp.arange(6.0) + 1.0
    tree = {"params": [a * 2.0, (a * 3.0, None)], "step": 3, "host": np.ones(2)}
    before = tg.counters.schedule_count
    assert tg.block_until_ready(tree) is tree             # JAX returns its argument
    assert tg.counters.schedule_count - before == 1        # both lazy leaves, one schedule
    assert all(tg.tensor.is_realized(t.uop) for t in (tree["params"][0], tree["params"][1][0]))
    np.testing.assert_allclose(tree["params"][1][0].numpy(), (np.arange(6.0) + 1.0) * 3.0)
