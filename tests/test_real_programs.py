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


def test_an_eager_graph_seen_before_finds_its_schedule_without_building_its_abstraction(monkeypatch):
    """Each eager step builds the same graph over new buffers and values: its template is found from a description
    of the graph (eager.describe), not by building the abstract graph (eager.abstract_graph) and its content hashes.
    What the description leaves out (which buffer, which lifted value) never picks a wrong schedule: literals 0 and 1,
    a buffer read twice and two buffers are different graphs."""
    from tgfx.lowering import eager
    builds = []
    real = eager.abstract_graph

    def spy(nodes, device):   # noqa: ANN001, ANN202
        builds.append(True)
        return real(nodes, device)
    monkeypatch.setattr(eager, "abstract_graph", spy)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(8).astype(np.float32) for _ in range(2))
    for k, (x, y, c) in enumerate([(a, b, 0.5), (b, a, 2.5), (a, a, 3.0)]):
        tx, ty = tg.asarray(x), tg.asarray(y)
        np.testing.assert_allclose(((tx * c + ty) * ty).numpy(), (x * c + y) * y, rtol=1e-6)
        assert builds == ([True] if k == 0 else []), (k, builds)
        builds.clear()
    tx = tg.asarray(a)
    for c, want in ((0.0, 0 * a + a), (1.0, a + a), (2.0, 2 * a + a)):
        np.testing.assert_allclose((tx * c + tx).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose((tx * 2.0 + tg.asarray(b)).numpy(), 2 * a + b, rtol=1e-6)


def test_an_eager_graph_reads_each_use_of_a_constant_through_one_argument():
    """A lifted constant and the views between it and its use (`x * 1.5`: a CONST, its RESHAPE to a scalar, the
    EXPAND to x's shape) are one argument of the use; the constant and its views are not arguments themselves, which
    nothing would read (the graph had one per node: three interned buffers for the one 1.5)."""
    from tgfx.ir.ops import Ops
    from tgfx.ir.uop import UOp
    from tgfx.lowering.constants import graph_device
    from tgfx.lowering.eager import abstract_graph
    from tgfx.lowering.inline import walk
    x = tg.asarray(np.arange(16, dtype=np.float32).reshape(4, 4))
    buf = x.uop.src[0]   # (x: a RESHAPE of its buffer)

    def arguments(z: tg.Tensor) -> int:
        nodes = walk(UOp(Ops.SINK, None, (z.uop,)))
        inputs, abstract = abstract_graph(nodes, graph_device(nodes))
        read = {u.arg[0] for u in walk(abstract) if u.op is Ops.BUFFER and u.arg[0] < 0}
        assert read == {-1 - k for k in range(len(inputs))}   # every argument is read
        assert inputs.count(buf) == 1
        return len(inputs)
    assert arguments(x * 1.5) == 2 and arguments(x * 1.5 + 2.5) == 3
    assert arguments(tg.nn.softmax(x * 3.0, axis=1)) >= 2 and arguments(x[1] * 0.5 + x.sum() * 0.5) >= 3


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


def test_a_functions_result_the_graph_computes_is_a_sibling_but_not_its_other_results():
    from tgfx.tensor import is_realized
    # `order = argsort(x)` (a function's result), read by `x[order]`: stored with it, so a later `cumsum(y[order])`
    # does not sort again (an eager data pipeline sorted 3 times more than it asked for); of `q, r = qr(m)`, reading
    # q computes q alone
    x = tg.asarray(np.random.default_rng(0).standard_normal(2000).astype(np.float32))   # (sorted by a loop)
    order = tnp.argsort(x)
    np.testing.assert_array_equal(x[order][:3].numpy(), np.sort(x.numpy())[:3])
    assert is_realized(order.uop)
    np.testing.assert_array_equal(order.numpy(), np.argsort(x.numpy(), kind="stable"))
    q, r = tnp.linalg.qr(tg.asarray(np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)))
    q.numpy()
    assert is_realized(q.uop) and not is_realized(r.uop)
    np.testing.assert_allclose((q @ r).numpy(), np.random.default_rng(1).standard_normal((4, 3)), atol=1e-5)


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


def _conv(x, w, b, stride, padding):
    return tg.lax.conv_general_dilated(x, w, stride, padding, dimension_numbers=("NHWC", "HWIO", "NHWC")) + b


def _dp_predict(params, x):
    (w1, b1), (w2, b2), (w3, b3) = params
    h = tnp.tanh(_conv(x, w1, b1, (2, 2), "SAME"))
    h = tg.lax.reduce_window(h, -tnp.inf, tg.lax.max, (1, 2, 2, 1), (1, 1, 1, 1), "VALID")   # a max pool
    h = tnp.tanh(h.reshape(h.shape[0], -1) @ w2 + b2)
    return h @ w3 + b3


def _dp_loss(params, batch):
    x, y = batch
    return -tnp.mean(tnp.sum(tg.nn.log_softmax(_dp_predict(params, x)) * y, axis=1))


def _clipped_grad(params, clip, example):
    grads = tg.grad(_dp_loss)(params, example)
    norm = tnp.linalg.norm(tnp.stack([tnp.linalg.norm(g.ravel()) for g in tg.tree.leaves(grads)]))
    return tg.tree.map(lambda g: g / tnp.maximum(norm / clip, 1.0), grads)


def _private_grad(params, batch, key, noise):
    """JAX's examples/differentially_private_sgd.py: per-example gradients (vmap of grad over examples that are
    batches of one), each clipped to norm 1.5, summed, Gaussian noise added, averaged."""
    clipped = tg.vmap(_clipped_grad, (None, None, 0))(params, 1.5, batch)
    leaves, tree = tg.tree.flatten(clipped)
    keys = tg.random.split(key, len(leaves))
    noised = [g.sum(0) + 1.5 * noise * tg.random.normal(k, g.shape[1:]) for k, g in zip(keys, leaves, strict=True)]
    return tg.tree.unflatten(tree, [g / batch[0].shape[0] for g in noised])


def test_private_sgd_per_example_gradients_compile_small_kernels():
    """Per-example gradients of a small convolutional net (vmap of grad), clipped, summed, with noise: the values
    are a loop over the examples' gradients; and no kernel of the jitted step unrolls a costly epilogue or a second
    reduce across a register tile's lanes (its noise: 2.5-3 MB of IR and 7 s of LLVM a kernel; its max pool's count
    of maxima beside the dense layer's gradient: 200 KB), which made the first call 13 s (jax: 2.8)."""
    from tgfx import lowering
    rng = np.random.default_rng(0)
    shapes = [((3, 3, 1, 8), (8,)), ((5 * 5 * 8, 16), (16,)), ((16, 10), (10,))]
    # on the CPU, whatever the default device (`-p tests.emulated_cuda` makes it CUDA:0): these are its kernels
    params = [(tg.asarray(rng.normal(size=w).astype(np.float32) * 0.3, device="CPU"), tg.asarray(rng.normal(
        size=b).astype(np.float32) * 0.1, device="CPU")) for w, b in shapes]
    x = rng.normal(size=(16, 1, 12, 12, 1)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 16)][:, None, :]
    batch, key = (tg.asarray(x, device="CPU"), tg.asarray(y, device="CPU")), tg.device_put(tg.random.key(0), "CPU")
    step = tg.jit(_private_grad)
    got = tg.tree.leaves(step(params, batch, key, 0.0))
    want = [0.0] * len(got)
    for i in range(16):
        g = tg.tree.leaves(_clipped_grad(params, 1.5, (tg.asarray(x[i]), tg.asarray(y[i]))))
        want = [a + b.numpy() / 16 for a, b in zip(want, g, strict=True)]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a.numpy(), b, rtol=2e-4, atol=1e-6)
    tg.tree.leaves(step(params, batch, key, 1.1))[0].numpy()   # noise drawn in the gradients' kernels
    names = {p.name for prog, *_ in step._cache.values() for seg in prog.segments for p in seg.cb.programs}
    held = [k for k in (lowering._kernels.get(key) for key in list(lowering._kernels)) if k and k.name in names]
    assert len({k.name for k in held}) == len(names)
    sizes = {k.name: len(lowering.kernel_source(k.ast, lowering.host_target(), k.opts or None).ir) for k in held}
    assert max(sizes.values()) < 100_000, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]


def test_a_lazy_value_a_jitted_function_captures_is_computed_once():
    """JAX's kernel_lsq: `gram_mat` is an eager (here lazy) value that the jitted update's loss closes over. It is
    computed when the trace is made, not again by every call (two of the step's seven kernels were G's); what the
    function itself computes from captured values alone is a constant too. A captured outer product bigger than what
    it reads (and than CAPTURED_MIN_ELEMENTS) stays in the program: it is not stored whole."""
    rng = np.random.default_rng(0)
    xs_np = rng.standard_normal((100, 20)).astype(np.float32)
    xs = tg.asarray(xs_np)
    gram = xs @ xs.T                                         # lazy: not computed yet
    scale = tnp.sum(xs * xs)                                 # another lazy capture

    @tg.jit
    def update(i, v):
        g = tg.grad(lambda v: 0.5 * tnp.sum((gram @ v - 1.0) ** 2))(v)
        return v - 1e-4 * g / scale + 0.0 * i

    v = tnp.zeros(100)
    update(0, v)
    tg.counters.reset()
    out = update(1, v)
    out.numpy()
    per_call = tg.counters.kernel_count
    g_np = xs_np @ xs_np.T
    want = -1e-4 * (g_np.T @ (g_np @ np.zeros(100, np.float32) - 1.0)) / (xs_np * xs_np).sum()
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4)
    realized = tg.jit(lambda v: v - 1e-4 * tg.grad(lambda v: 0.5 * tnp.sum((gram @ v - 1.0) ** 2))(v) / scale)
    realized(v)
    tg.counters.reset()
    realized(v).numpy()
    assert per_call == tg.counters.kernel_count <= 3   # gram and scale are buffers in both: never computed per call
    w = tg.asarray(rng.standard_normal(300).astype(np.float32))
    outer = tg.jit(lambda v: tnp.sum(w[:, None] * w[None, :] * v))   # 90,000 elements from 300: stays lazy
    ones = tnp.ones((300, 300)).realize()
    np.testing.assert_allclose(outer(ones).numpy(), np.outer(w.numpy(), w.numpy()).sum(), rtol=1e-3)
    tg.counters.reset()
    outer(ones).numpy()
    assert tg.counters.kernel_count == 1 and tg.counters.alloc_count <= 1   # no 90,000-element constant


def test_captured_indices_gather_one_element_a_load_not_through_a_stored_mask():
    """A graph network's `h[senders]` with `senders` captured (a closure's index array): its one-hot mask `senders ==
    arange(nodes)` is computed from captured values alone, and small enough to be made a constant of the program, but
    the schedule reads a gather off it: stored, the gather was a masked sum over every node for each edge (256 edges
    of 64 nodes: 16 us, 1.5 as loads). No kernel of the step (its gradient's scatter too) reads a stored mask."""
    from tgfx import lowering
    from tgfx.dtypes import dtypes
    from tgfx.ir.ops import Ops
    rng = np.random.default_rng(0)
    nodes, edges, d = 64, 256, 8
    snd, rcv = (rng.integers(0, nodes, edges).astype(np.int32) for _ in range(2))
    senders, receivers = tg.asarray(snd), tg.asarray(rcv)
    h, w = rng.standard_normal((nodes, d)).astype(np.float32), rng.standard_normal((d, d)).astype(np.float32)

    def loss(w, h):
        return tnp.tanh(tg.ops.segment_sum(h[senders] @ w, receivers, nodes)).sum()
    step = tg.jit(tg.grad(loss, argnums=(0, 1)))
    dw, dh = step(tg.asarray(w), tg.asarray(h))
    names = {p.name for prog, *_ in step._cache.values() for seg in prog.segments for p in seg.cb.programs}
    asts = [k.ast for k in (lowering._kernels.get(key) for key in list(lowering._kernels)) if k and k.name in names]
    assert asts and not any(u.op is Ops.DEFINE_GLOBAL and u.dtype is dtypes.bool for a in asts for u in a.toposort())
    z = np.zeros((nodes, d), np.float32)
    np.add.at(z, rcv, h[snd] @ w)
    gz = np.zeros((nodes, d), np.float32)
    gm = (1 - np.tanh(z) ** 2)[rcv]                         # d loss / d messages
    np.add.at(gz, snd, gm @ w.T)
    np.testing.assert_allclose(dw.numpy(), h[snd].T @ gm, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dh.numpy(), gz, rtol=1e-4, atol=1e-4)


def test_a_loop_counter_argument_allocates_nothing_per_call_and_each_call_sees_its_own():
    """`update(i, state)` with a new Python int every call (JAX's kernel_lsq, an optimizer's step count): the value is
    written into one of a few buffers the program owns, not interned as a new buffer per value (11 of a 16 us step).
    Calls queued back to back each read their own value (a buffer is not rewritten while a queued call may read it),
    and so do calls from several threads at once."""
    from helpers import run_threads
    x = tg.asarray(np.arange(4096, dtype=np.float32))
    f = tg.jit(lambda i, x: x * i + 1.0)
    for i in range(8):
        f(i, x)
    before = tg.counters.alloc_count
    outs = [f(i, x) for i in range(100, 164)]               # queued without waiting
    assert tg.counters.alloc_count - before <= 64 + 2        # the results, all held: no buffer per value
    for i, out in zip(range(100, 164), outs, strict=True):
        assert out[5].item() == 5.0 * i + 1.0
    wrong: list = []

    def worker(t: int) -> None:
        try:
            for i in range(60):
                v = t * 1000 + i
                if f(v, x)[3].item() != 3.0 * v + 1.0:
                    wrong.append((t, i))
        except Exception as e:  # noqa: BLE001 - a thread's failure is this test's
            wrong.append((t, repr(e)))
    assert run_threads(worker, 4, switch_interval=1e-5, timeout=120) and not wrong


def test_a_deeper_residual_network_compiles_no_new_kernel(monkeypatch):
    """A residual stream (x + f(layer_norm(x)), block after block) is stored once a block (fusion.SHARED_READS):
    recomputed, each block's layer norms read every earlier block's outputs (quadratic reads in depth) and were kernels
    of their own. Stored, a middle block's kernels are the same as its neighbours': a network one or two blocks
    deeper compiles nothing new (it compiled 12 more kernels a block)."""
    from tgfx import config, lowering
    monkeypatch.setattr(config.DISK_CACHE, "value", 0)
    lowering.forget_compiled()

    def layer_norm(x):
        m = x.mean(-1, keepdims=True)
        return (x - m) / tnp.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)

    def loss(ws, x):
        for w in ws:
            x = x + tnp.tanh(layer_norm(x) @ w)
        return (layer_norm(x) ** 2).mean()
    rng = np.random.default_rng(0)
    x = tg.asarray(rng.standard_normal((64, 8, 128)).astype(np.float32))
    compiles = []
    for depth in (3, 4, 5):
        ws = [tg.asarray(rng.standard_normal((128, 128)).astype(np.float32) * 0.05) for _ in range(depth)]
        tg.counters.reset()
        value, g = tg.jit(tg.value_and_grad(loss))(ws, x)
        compiles.append(tg.counters.compile_count)
        h = x.numpy()
        for w in ws:
            xm = h - h.mean(-1, keepdims=True)
            h = h + np.tanh(xm / np.sqrt((xm ** 2).mean(-1, keepdims=True) + 1e-5) @ w.numpy())
        xm = h - h.mean(-1, keepdims=True)
        np.testing.assert_allclose(value.numpy(), ((xm / np.sqrt((xm ** 2).mean(-1, keepdims=True) + 1e-5)) ** 2)
                                   .mean(), rtol=1e-4)
    assert compiles[0] > 0 and compiles[1:] == [0, 0], compiles
    lowering.forget_compiled()


# The quick forms of bench/ported_science.py's programs, their first three steps' values as jax 0.10.2 computes them
# (`python -m bench.programs --quick`): molecular dynamics (the total energy), a Kalman filter's likelihood with a
# particle filter's (the same random draws as jax's), a Fourier neural operator's Adam steps, a heat equation's adjoint
SCIENCE = {"md": [-141.23239135742188, -141.17803955078125, -141.18377685546875],
           "filters": [-2.335012912750244, -2.3252100944519043, -2.3229563236236572],
           "fno": [1.2324085235595703, 1.1724650859832764, 1.3237659931182861],
           "heat": [0.018518295139074326, 0.008193708024919033, 0.004630269017070532]}


@pytest.mark.parametrize("name", SCIENCE)
def test_a_scientific_program_computes_jaxs_values(name):
    from bench import ported_science
    from bench.frameworks import tgfx_fw
    run = getattr(ported_science, name)(tgfx_fw(), True)
    np.testing.assert_allclose([float(run(i)) for i in range(3)], SCIENCE[name], rtol=1e-5)


# the first two steps' losses of bench/ported_models.py's programs at their quick sizes under jax 0.10.2 (CPU, the
# bench's jax Fw): the same numpy initial values and batches, the second step's after an Adam update by the first's
# gradient
_JAX_LOSSES = {
    "unet": (1.1977226734161377, 1.220166802406311),
    "nerf": (0.15139886736869812, 0.14896661043167114),
    "lru": (1.7869445085525513, 1.4415361881256104),
    "lru_scan": (1.78694486618042, 1.4415361881256104),
    "mamba": (4.339394569396973, 4.282291412353516),
}


@pytest.mark.parametrize("name", sorted(_JAX_LOSSES))
def test_a_model_program_trains_as_it_does_under_jax(name):
    """Model families as JAX users write them (bench/ported_models.py, a jitted step with Adam): a U-Net denoiser
    (group norm, strided convolutions down, `conv_transpose` up, skips concatenated), NeRF (positional encodings, an
    exclusive `cumprod` of transmittances), a linear recurrent unit by `associative_scan` and by `scan`, and a
    Mamba-style selective scan. Their quick forms' first two losses are jax's."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # bench/ is not installed
    from bench import ported_models
    from bench.frameworks import tgfx_fw
    run = getattr(ported_models, name)(tgfx_fw(), True)
    np.testing.assert_allclose([float(run(i)) for i in range(2)], _JAX_LOSSES[name], rtol=1e-4)


# the first two steps' losses of bench/ported_sharded.py's programs at their quick sizes under jax 0.10.2 (CPU, two
# host devices by XLA_FLAGS, the bench's jax Fw): the same numpy initial values and batches
_JAX_SHARDED_LOSSES = {
    "dp_mlp": (2.5812442302703857, 2.556729793548584),
    "tp_mlp": (4.166479110717773, 4.192708969116211),
    "dp_transformer": (3.6067452430725098, 3.998657703399658),
}


@pytest.mark.parametrize("name", sorted(_JAX_SHARDED_LOSSES))
def test_a_sharded_program_trains_as_it_does_under_jax(name):
    """Sharded training over CPU:0 and CPU:1 as JAX users write it (bench/ported_sharded.py): a data-parallel MLP
    with momentum (batch split, parameters replicated, the gradient's all-reduce implied), a Megatron-style
    tensor-parallel MLP block in a small transformer-ish model with Adam, and a data-parallel transformer LM with
    dropout keys split eagerly and a learning-rate schedule computed between steps. Their quick forms' first two
    losses are jax's, and a step after the first compiles nothing."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # bench/ is not installed
    from bench import ported_sharded
    from bench.frameworks import tgfx_fw
    run = getattr(ported_sharded, name)(tgfx_fw(), True)
    np.testing.assert_allclose([float(run(i)) for i in range(2)], _JAX_SHARDED_LOSSES[name], rtol=1e-5)
    tg.counters.reset()
    float(run(2))
    assert tg.counters.compile_count == 0 and tg.counters.trace_count == 0
