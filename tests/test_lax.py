"""tg.lax: every construct against the equivalent Python loop (values and gradients to 1e-5), eagerly and under jit.

The references run the same body functions in a Python loop on Tensors (unrolled graphs, differentiated by the
ordinary rules), so a test compares the device loop with what the loop means. Counts, never times: a 1,000-step
loop compiles and submits exactly what a 10-step loop does, and the device's profile shows it ran the body 1,000
times.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.devices import get_device
from tgfx.ir.ops import Ops
from tgfx.lowering import forget_compiled
from tgfx.tree import tree_leaves, tree_map

f32 = np.float32


def close(a: Any, b: Any, tol: float = 1e-5) -> None:
    la, lb = tree_leaves(a), tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


def rand(*shape: int, seed: int = 0) -> tg.Tensor:
    return tg.asarray(np.random.default_rng(seed).standard_normal(shape).astype(f32))


# ---- the equivalent Python loops ----
def py_fori(lo: int, hi: int, body: Callable, init: Any) -> Any:
    val = init
    for i in range(lo, hi):
        val = body(tg.asarray(np.int32(i)), val)
    return val


def py_scan(f: Callable, init: Any, xs: Any, length: int | None = None, reverse: bool = False) -> Any:
    n = length if xs is None else tree_leaves(xs)[0].shape[0]
    carry, ys = init, []
    for i in (reversed(range(n)) if reverse else range(n)):
        carry, y = f(carry, None if xs is None else tree_map(lambda x, i=i: x[i], xs))
        ys.append(y)
    ys = ys[::-1] if reverse else ys
    return carry, tree_map(lambda *y: tnp.stack(list(y)), *ys) if ys and tree_leaves(ys[0]) else ys[0] if ys else None


def py_while(cond: Callable, body: Callable, init: Any, max_steps: int | None = None) -> Any:
    val, steps = init, 0
    while bool(cond(val)) and (max_steps is None or steps < max_steps):
        val, steps = body(val), steps + 1
    return val


def py_switch(index: int, branches: list[Callable], *ops: Any) -> Any:
    return branches[min(max(index, 0), len(branches) - 1)](*ops)


# ---- fori_loop ----
def elementwise_body(i: tg.Tensor, x: tg.Tensor) -> tg.Tensor:
    return tnp.sin(x) * 0.9 + i.astype(tg.dtypes.float32) * 0.01


def mixing_body(w: tg.Tensor) -> Callable:
    return lambda i, x: tnp.tanh(x @ w) + x * 0.5 + i.astype(tg.dtypes.float32) * 0.1


@pytest.mark.parametrize("n", [0, 1, 7])
@pytest.mark.parametrize("kind", ["elementwise", "mixing"])
def test_fori_loop_matches_python_loop(n: int, kind: str) -> None:
    x, w = rand(2, 3), rand(3, 3, seed=1) * 0.5

    def loop(lax_fori: Callable) -> Callable:
        def f(x: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
            body = elementwise_body if kind == "elementwise" else mixing_body(w)
            return (lax_fori(2, 2 + n, body, x) ** 2).sum()
        return f
    ours, ref = loop(tg.lax.fori_loop), loop(py_fori)
    close(ours(x, w), ref(x, w))
    close(tg.grad(ours, argnums=(0, 1))(x, w), tg.grad(ref, argnums=(0, 1))(x, w))


def test_elementwise_loop_is_one_kernel_with_a_range() -> None:
    x = rand(5)
    tg.counters.reset()
    y = tg.lax.fori_loop(0, 50, elementwise_body, x).realize()
    assert (tg.counters.kernel_count, tg.counters.copy_count) == (1, 0)
    close(y, py_fori(0, 50, elementwise_body, x))
    # the backward scans the saved carries, elementwise too: one launch of one kernel
    loss = lambda x: tg.lax.fori_loop(0, 50, elementwise_body, x).sum()   # noqa: E731
    ran = profiled(lambda: tg.grad(loss)(x).numpy())
    assert [n for name, n in ran.items() if name.startswith("loop_") and "backward" in name] == [1], ran
    close(tg.grad(loss)(x), tg.grad(lambda x: py_fori(0, 50, elementwise_body, x).sum())(x))
    xs = rand(6, 5, seed=2)
    close(tg.lax.scan(lambda c, r: (c * 0.9 + r, None), x, xs, reverse=True)[0],
          py_scan(lambda c, r: (c * 0.9 + r, None), x, xs, reverse=True)[0])


def test_an_elementwise_scan_with_stacked_outputs_is_one_kernel() -> None:
    # each step's slices of the stacked outputs are stored inside the kernel's step range (an EMA of 512 steps over
    # 256 elements ran as 512 launches of a loop BLOCK: 238 -> 40 us), forward and reversed; its backward reads the
    # carries saved at every step, stored the same way, and is one loop kernel too
    xs = rand(10, 7, seed=3)

    def body(c: tuple, r: tg.Tensor) -> tuple:
        a, k = c
        a = a * 0.9 + r
        return (a, k + 1.0), (a * 2.0, k - a)
    init = (rand(7, seed=4).realize(), tnp.zeros(7).realize())
    xs.realize()
    for reverse in (False, True):
        tg.counters.reset()
        got = tg.lax.scan(body, init, xs, reverse=reverse)
        tg.realize(*tg.tree.leaves(got))
        assert tg.counters.kernel_count == 1
        close(got, py_scan(body, init, xs, reverse=reverse))
    loss = lambda xs: (tg.lax.scan(body, init, xs)[1][1] ** 2).sum()   # noqa: E731
    ran = profiled(lambda: tg.grad(loss)(xs).numpy())
    assert [n for name, n in ran.items() if name.startswith("loop_") and "backward" in name] == [1], ran
    close(tg.grad(loss)(xs), tg.grad(lambda xs: (py_scan(body, init, xs)[1][1] ** 2).sum())(xs))


def test_fori_loop_with_tensor_bounds_reads_the_trip_count_on_the_device() -> None:
    x = rand(4)

    @tg.jit
    def f(x: tg.Tensor, lo: tg.Tensor, hi: tg.Tensor) -> tg.Tensor:
        return tg.lax.fori_loop(lo, hi, lambda i, c: c * 0.5 + i.astype(tg.dtypes.float32), x)
    for lo, hi in [(0, 5), (3, 4), (2, 2), (5, 1)]:
        close(f(x, tg.asarray(np.int32(lo)), tg.asarray(np.int32(hi))),
              py_fori(lo, hi, lambda i, c: c * 0.5 + i.astype(tg.dtypes.float32), x))
    assert f.trace_count == 1
    # a number bound goes to the device of the Tensor one (it was made on the default device: "operands are on
    # different devices")
    x1 = tg.device_put(x, "CPU:1")
    g = tg.jit(lambda x, hi: tg.lax.fori_loop(0, hi, lambda i, c: c * 0.5 + i.astype(tg.dtypes.float32), x))
    out = g(x1, tg.device_put(np.int32(3), "CPU:1"))
    assert out.device == "CPU:1"
    close(out, py_fori(0, 3, lambda i, c: c * 0.5 + i.astype(tg.dtypes.float32), x))


def test_fori_loop_with_known_tensor_bounds_is_a_scan_reverse_mode_differentiates() -> None:
    # bounds that are Tensors of known value (tnp.int32(3), not arguments of a trace) make a scan of that many steps,
    # as JAX's: a loop counting its steps on the device has no reverse mode (a TypeError where JAX differentiates)
    x = rand(4)
    f = lambda x: tg.lax.fori_loop(tnp.int32(1), tnp.int32(4), lambda i, c: tnp.sin(c) * i, x).sum()   # noqa: E731
    want = np.cos(x.numpy()) * 1
    for i in (2, 3):
        want = want * np.cos(py_fori(1, i, lambda j, c: tnp.sin(c) * j, x).numpy()) * i
    close(tg.grad(f)(x), want)
    close(tg.lax.fori_loop(tnp.int32(5), tnp.int32(2), lambda i, c: c * 2.0, x), x)


@settings(max_examples=8)
@given(st.integers(0, 12), st.lists(st.floats(-2, 2, width=32), min_size=1, max_size=4))
def test_fori_loop_matches_numpy(n: int, vals: list[float]) -> None:
    x = np.array(vals, f32)
    ref = x.copy()
    for i in range(n):
        ref = ref * f32(0.75) + f32(i)
    close(tg.lax.fori_loop(0, n, lambda i, c: c * 0.75 + i.astype(tg.dtypes.float32), tg.asarray(x)), ref)


# ---- scan ----
def rnn_cell(p: dict) -> Callable:
    def step(carry: dict, x: tuple) -> tuple:
        h = tnp.tanh(carry["h"] @ p["wh"] + x[0] @ p["wx"] + x[1])
        return {"h": h, "acc": carry["acc"] + h.sum(axis=1)}, {"h": h, "sq": (h * h).mean()}
    return step


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_pytrees_matches_python_loop(reverse: bool) -> None:
    p = {"wh": rand(4, 4, seed=1) * 0.5, "wx": rand(3, 4, seed=2) * 0.5}
    init = {"h": rand(2, 4, seed=3), "acc": tnp.zeros(2)}
    xs = (rand(5, 2, 3, seed=4), rand(5, 2, 4, seed=5))

    def loss(scan: Callable) -> Callable:
        def f(p: dict, init: dict, xs: tuple) -> tg.Tensor:
            carry, ys = scan(rnn_cell(p), init, xs, reverse=reverse)
            return carry["acc"].sum() + (ys["h"] * ys["h"]).sum() * 0.5 + ys["sq"].sum()
        return f
    ours, ref = loss(tg.lax.scan), loss(py_scan)
    close(tg.lax.scan(rnn_cell(p), init, xs, reverse=reverse), py_scan(rnn_cell(p), init, xs, reverse=reverse))
    close(ours(p, init, xs), ref(p, init, xs))
    close(tg.grad(ours, argnums=(0, 1, 2))(p, init, xs), tg.grad(ref, argnums=(0, 1, 2))(p, init, xs))


@settings(max_examples=8)
@given(st.integers(1, 9), st.integers(1, 3), st.booleans())
def test_scan_cumulative_sums_match_numpy(n: int, m: int, reverse: bool) -> None:
    xs = np.random.default_rng(n * 10 + m).standard_normal((n, m)).astype(f32)
    total, ys = tg.lax.scan(lambda c, x: (c + x, c + x), tnp.zeros(m), tg.asarray(xs), reverse=reverse)
    ref = np.cumsum(xs[::-1], axis=0)[::-1] if reverse else np.cumsum(xs, axis=0)
    close(ys, ref)
    close(total, xs.sum(axis=0))


def test_scan_without_xs_and_of_length_zero() -> None:
    c, ys = tg.lax.scan(lambda c, _: (c * 2.0, c), 1.0, length=4)
    close((c, ys), (16.0, np.array([1, 2, 4, 8], f32)))
    c, ys = tg.lax.scan(lambda c, x: (c + x, c * x), tnp.ones(2), tnp.zeros((0, 2)))
    assert ys.shape == (0, 2)
    close(c, np.ones(2, f32))


def test_scan_carry_passthrough_and_swap() -> None:
    """Carries that return another carry's buffer, or an input slice, are copied back without clobbering."""
    def step(c: tuple, x: tg.Tensor) -> tuple:
        a, b, k = c
        return (b, a, x), a + k
    init = (tnp.ones(3), tnp.zeros(3) + 2.0, tnp.zeros(3))
    xs = tg.asarray(np.arange(12, dtype=f32).reshape(4, 3))
    close(tg.lax.scan(step, init, xs), py_scan(step, init, xs))


# ---- while_loop ----
def grow(x: tg.Tensor) -> tg.Tensor:
    return x * 1.5 + tnp.sin(x) * 0.1


def small(x: tg.Tensor) -> tg.Tensor:
    return (x * x).sum() < 30.0


@pytest.mark.parametrize("scale", [0.1, 1.0, 100.0])     # several steps, one step, no step at all
def test_while_loop_matches_python_loop(scale: float) -> None:
    x = rand(3) * scale
    close(tg.lax.while_loop(small, grow, x), py_while(small, grow, x))

    def ours(x: tg.Tensor) -> tg.Tensor:
        return tg.lax.while_loop(small, grow, x, max_steps=64).sum()
    close(tg.grad(ours)(x), tg.grad(lambda x: py_while(small, grow, x).sum())(x))


def test_while_loop_max_steps_bounds_the_loop() -> None:
    x = rand(3) * 0.01
    close(tg.lax.while_loop(small, grow, x, max_steps=2), py_while(small, grow, x, max_steps=2))
    g = tg.grad(lambda x: tg.lax.while_loop(small, grow, x, max_steps=2).sum())(x)
    close(g, tg.grad(lambda x: py_while(small, grow, x, max_steps=2).sum())(x))


def test_while_loop_with_integer_counter_and_closure() -> None:
    w = rand(3, 3) * 0.3

    def body(c: tuple) -> tuple:
        i, x = c
        return i + 1, tnp.tanh(x @ w) + 1.0

    def f(x: tg.Tensor) -> tg.Tensor:
        return tg.lax.while_loop(lambda c: c[0] < 5, body, (tg.asarray(np.int32(0)), x), max_steps=10)[1].sum()

    def ref(x: tg.Tensor) -> tg.Tensor:
        return py_while(lambda c: c[0] < 5, body, (tg.asarray(np.int32(0)), x))[1].sum()
    x = rand(2, 3)
    close(f(x), ref(x))
    close(tg.grad(f)(x), tg.grad(ref)(x))


# ---- cond and switch ----
BRANCHES = [lambda a, b: (a * b, a - b), lambda a, b: (tnp.sin(a) * b, b * 3.0), lambda a, b: (a @ a.T @ b, a)]


@pytest.mark.parametrize("index", [-2, 0, 1, 2, 7])
def test_switch_matches_python_and_clamps(index: int) -> None:
    a, b = rand(3, 3), rand(3, 3, seed=1)
    close(tg.lax.switch(index, BRANCHES, a, b), py_switch(index, BRANCHES, a, b))

    def loss(sw: Callable) -> Callable:
        return lambda a, b: sum(((o * o).sum() for o in sw(index, BRANCHES, a, b)), tg.asarray(f32(0)))
    close(tg.grad(loss(tg.lax.switch), argnums=(0, 1))(a, b), tg.grad(loss(py_switch), argnums=(0, 1))(a, b))


@pytest.mark.parametrize("pred", [True, False])
def test_cond_matches_python(pred: bool) -> None:
    x = rand(4)

    def f(x: tg.Tensor, p: tg.Tensor) -> tg.Tensor:
        return tg.lax.cond(p, lambda v: tnp.exp(v) * v, lambda v: v ** 3, x).sum()
    p = tg.asarray(pred)
    close(f(x, p), (tnp.exp(x) * x if pred else x ** 3).sum())
    close(tg.grad(f)(x, p), tg.grad(lambda x: (tnp.exp(x) * x if pred else x ** 3).sum())(x))


def profiled(fn: Callable) -> Counter:
    """Names of the programs the device ran during fn()."""
    dev = get_device()   # the default device, where these programs run
    dev.synchronize()
    dev.clear_profile()
    fn()
    dev.synchronize()
    return Counter(e.name for e in dev.profile_events)


def test_cond_under_jit_runs_only_the_branch_the_device_picks() -> None:
    """One trace, one encoded program; the predicate's value decides on the device which kernels run."""
    x, w = rand(64, 64), rand(64, 64, seed=1)

    @tg.jit
    def f(x: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
        return tg.lax.cond(x.sum() > 0, lambda a: (a @ w) @ w, lambda a: a * 2.0, x)
    outs = {}
    for sign in (1.0, -1.0):
        xx = tg.asarray(np.abs(x.numpy()) * sign)
        ran = profiled(lambda xx=xx, sign=sign: outs.setdefault(sign, f(xx, w)).numpy())
        reduces = sum(n for name, n in ran.items() if name.startswith("r_"))
        close(outs[sign], (xx @ w) @ w if sign > 0 else xx * 2.0, tol=1e-4)
        # the sum feeding the predicate is the only reduce when the cheap branch runs
        assert reduces == (3 if sign > 0 else 1), ran
    assert f.trace_count == 1


# ---- jit ----
@pytest.mark.x64
def test_every_construct_under_jit_matches_eager_and_replays() -> None:
    def f(x: tg.Tensor, xs: tg.Tensor, n: tg.Tensor) -> tuple:
        a = tg.lax.fori_loop(0, 6, lambda i, c: c * 0.5 + x, x)
        b = tg.lax.while_loop(lambda c: c.sum() < 50.0, lambda c: c * 2.0 + 0.1, tnp.abs(x) + 0.1)
        c = tg.lax.cond(x.sum() > 0, lambda v: v @ v.T, lambda v: -(v @ v.T), x)
        d = tg.lax.fori_loop(0, n, lambda i, c: c + i.astype(tg.dtypes.float32), tnp.zeros_like(x))
        e = tg.lax.scan(lambda c, r: (c + r.sum(), c * r), x.sum(axis=1), xs)
        return a, b, c, d, e
    jf = tg.jit(f)
    for seed in range(3):
        args = (rand(3, 3, seed=seed), rand(4, 3, seed=seed + 10), tg.asarray(np.int32(seed + 2)))
        close(jf(*args), f(*args), tol=1e-4)
    assert jf.trace_count == 1


def test_jit_grad_through_every_construct() -> None:
    def loss(x: tg.Tensor) -> tg.Tensor:
        a = tg.lax.fori_loop(0, 4, lambda i, c: tnp.tanh(c @ x), x)
        b = tg.lax.while_loop(lambda c: c.sum() < 20.0, lambda c: c * 1.7 + 0.1, tnp.abs(x) + 0.1, max_steps=30)
        c = tg.lax.cond(a.sum() > 0, lambda v: tnp.sin(v) * v, lambda v: v * v, x)
        _, ys = tg.lax.scan(lambda h, r: (tnp.tanh(h + r), h * r), x[0], x)
        return a.sum() + b.sum() + c.sum() + ys.sum()

    def ref(x: tg.Tensor) -> tg.Tensor:
        a = py_fori(0, 4, lambda i, c: tnp.tanh(c @ x), x)
        b = py_while(lambda c: c.sum() < 20.0, lambda c: c * 1.7 + 0.1, tnp.abs(x) + 0.1)
        c = tnp.sin(x) * x if float(a.sum()) > 0 else x * x
        _, ys = py_scan(lambda h, r: (tnp.tanh(h + r), h * r), x[0], x)
        return a.sum() + b.sum() + c.sum() + ys.sum()
    g = tg.jit(tg.grad(loss))
    for seed in range(2):
        x = rand(3, 3, seed=seed) * 0.5
        close(g(x), tg.grad(ref)(x), tol=2e-5)
    assert g.trace_count == 1


def test_loop_inside_jit_with_donation_and_memory_planning() -> None:
    """Intermediates of a loop body live across steps correctly when the planner packs them into one arena."""
    def f(x: tg.Tensor) -> tg.Tensor:
        def step(c: tg.Tensor, r: tg.Tensor) -> tuple:
            t = tnp.exp(c[:, None] * c[None, :] * 0.1)
            u = (t @ t.T).sum(axis=0)
            return c * 0.5 + u * 0.01 + r, tnp.concatenate([u, t.sum(axis=1)])
        return tg.lax.scan(step, x[0], x)
    jf = tg.jit(f, donate_argnums=0)
    for seed in range(2):
        x = rand(5, 3, seed=seed)
        want = f(x)
        tg.realize(*tree_leaves(want))
        close(jf(tg.asarray(x.numpy())), want, tol=1e-4)


# ---- compile once, whatever the trip count ----
def counts(fn: Callable) -> dict[str, int]:
    tg.counters.reset()
    out = fn()
    tg.realize(*tree_leaves(out))
    return {"compile": tg.counters.compile_count, "schedule": tg.counters.schedule_count,
            "kernels": tg.counters.kernel_count, "copies": tg.counters.copy_count}


@pytest.mark.parametrize("kind", ["elementwise", "mixing"])
def test_1000_step_loop_compiles_and_submits_what_a_10_step_loop_does(kind: str) -> None:
    """Eagerly and under jit: equal compile, schedule, kernel-submission and copy counts, and an encoded program of
    the same size; the device ran the body 1,000 times. (The bodies differ by a constant: from no kernel seen, the
    first compiles its literal kernel and the second the kernel with that constant an argument, which the jitted
    pair then both use, `tgfx/lowering/lifted.py`; a kernel of the family an earlier test left would make the
    first count 0 and the second 1.)"""
    forget_compiled()
    w = (rand(8, 8) * 0.1).realize()

    def make(n: int, c: float) -> Callable:
        body = (lambda i, x: x * c + 1.0) if kind == "elementwise" else (lambda i, x: tnp.tanh(x @ w) * c + x)
        return lambda x: tg.lax.fori_loop(0, n, body, x)
    x = rand(4, 8)
    small, big = counts(lambda: make(10, 0.25)(x)), counts(lambda: make(1000, 0.5)(x))
    assert small == big and small["compile"] >= 1
    js, jb = tg.jit(make(10, 0.125)), tg.jit(make(1000, 0.375))
    small, big = counts(lambda: js(x)), counts(lambda: jb(x))
    assert small == big
    words = [sum(len(seg.cb.words) for seg in next(iter(j._cache.values()))[0].segments) for j in (js, jb)]
    assert words[0] == words[1]
    ran = profiled(lambda: jb(x).numpy())
    steps = max(n for name, n in ran.items() if name != "copy")
    assert steps == (1 if kind == "elementwise" else 1000), ran
    ref, wn = x.numpy(), w.numpy()
    for _ in range(1000):   # numpy: an unrolled graph of 1,000 matmuls is too deep to build
        ref = np.tanh(ref @ wn) * f32(0.375) + ref if kind == "mixing" else ref * f32(0.375) + f32(1)
    close(jb(x), ref, tol=1e-4)


def test_jitted_loops_are_one_submission_with_their_initial_copies_on_the_compute_queue() -> None:
    """Two loops in a row (non-elementwise bodies, so each copies its initial carries in) encode to one command
    buffer: the initial copies run inside the loop's block on the compute queue, not as submissions of their own to
    the copy engine (each a hand-off between threads)."""
    w = (rand(8, 8) * 0.1).realize()

    def f(x: tg.Tensor) -> tg.Tensor:
        y = tg.lax.fori_loop(0, 3, lambda i, c: tnp.tanh(c @ w) + c, x)
        return tg.lax.fori_loop(0, 4, lambda i, c: tnp.tanh(c @ w) * 0.5 + c, y * 2.0)
    jf = tg.jit(f)
    x = rand(4, 8)
    close(jf(x), f(x), tol=1e-5)
    assert len(next(iter(jf._cache.values()))[0].segments) == 1
    dev = get_device()   # the default device, where the program runs
    dev.synchronize()
    dev.clear_profile()
    jf(x).block_until_ready()
    dev.synchronize()
    copies = [e for e in dev.profile_events if e.name == "copy"]
    assert copies and all(e.queue == "compute" for e in copies), Counter(e.queue for e in copies)
    # the steps write their new carries straight into the other of the two carry buffers: the only copies are the
    # two loops' initial ones, whatever the trip counts
    assert len(copies) == 2, Counter(e.name for e in dev.profile_events)


def test_a_buffer_read_in_a_loop_before_it_is_written_there_lives_for_the_whole_loop() -> None:
    """The memory planner's lifetimes: a carry read by one step and written by the next holds its value across the
    jump back, so nothing after its last write in the block may take its memory; a temporary may."""
    from tgfx.lowering.control import command, copy_command, lifetimes
    from tgfx.lowering.layout import new_buffer
    init, carry, tmp, late = (new_buffer("CPU:0", 4, tg.dtypes.float32) for _ in range(4))
    calls = [command(Ops.BLOCK, (True, "CPU:0")),
             copy_command(carry, init, 16),    # 1: the initial carry
             copy_command(tmp, carry, 16),     # 2: a step reads it
             copy_command(carry, tmp, 16),     # 3: the next step writes it
             copy_command(late, tmp, 16),      # 4: a temporary after the carry's last write
             command(Ops.BLOCK, (False, "CPU:0"))]
    first, last = lifetimes(calls)
    assert (first[carry], last[carry]) == (0, 5)
    assert (first[late], last[late]) == (4, 4)


def test_what_a_loop_computes_before_its_top_lives_until_the_loop_ends() -> None:
    """A buffer written once before a loop's top (what the steps share: `_invariant`) and read in its steps is read
    again after every jump back: nothing later in the loop may take its memory."""
    from tgfx.lowering.control import command, copy_command, lifetimes
    from tgfx.lowering.layout import new_buffer
    w, shared, tmp, late, i = (new_buffer("CPU:0", 4, tg.dtypes.float32) for _ in range(5))
    calls = [command(Ops.BLOCK, (True, "CPU:0")),
             copy_command(shared, w, 16),      # 1: once, before the top
             command(Ops.LABEL, 1),
             copy_command(tmp, shared, 16),    # 3: each step reads it
             copy_command(late, tmp, 16),      # 4: a temporary after its last read
             command(Ops.JUMP, ("<", 5, 1), i),
             command(Ops.BLOCK, (False, "CPU:0"))]
    first, last = lifetimes(calls)
    assert (first[shared], last[shared]) == (0, 6)
    assert (first[late], last[late]) == (4, 4)


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_double_buffered_carries_end_in_the_right_buffer_for_odd_and_even_trip_counts(n: int) -> None:
    """Mixing bodies (not one loop kernel) whose steps alternate between two carry buffers: forward and reverse
    scans, a swap of two carries and a passed-through one, a trip count read on the device, and a while loop leaving
    after n steps, eagerly and under jit, against the Python loops."""
    w = rand(3, 3, seed=1) * 0.5
    xs = rand(n, 2, 3, seed=2)

    def step(c: tuple, x: tg.Tensor) -> tuple:
        a, b, k = c
        h = tnp.tanh(a @ w) + x
        return (b * 0.5 + h, h, k), h.sum()

    def f(x0: tg.Tensor, xs: tg.Tensor, hi: tg.Tensor) -> tuple:
        init = (x0, x0 * 2.0, x0 - 1.0)
        fwd = tg.lax.scan(step, init, xs)
        rev = tg.lax.scan(step, init, xs, reverse=True)
        dyn = tg.lax.fori_loop(0, hi, lambda i, c: tnp.tanh(c @ w) + i.astype(tg.dtypes.float32), x0)
        cnt = tg.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, tnp.tanh(c[1] @ w) + c[1]),
                                (tg.asarray(np.int32(0)), x0))
        return fwd, rev, dyn, cnt

    def ref(x0: tg.Tensor, xs: tg.Tensor, hi: tg.Tensor) -> tuple:
        init = (x0, x0 * 2.0, x0 - 1.0)
        fwd = py_scan(step, init, xs)
        rev = py_scan(step, init, xs, reverse=True)
        dyn = py_fori(0, n, lambda i, c: tnp.tanh(c @ w) + i.astype(tg.dtypes.float32), x0)
        cnt = py_while(lambda c: c[0] < n, lambda c: (c[0] + 1, tnp.tanh(c[1] @ w) + c[1]),
                       (tg.asarray(np.int32(0)), x0))
        return fwd, rev, dyn, cnt
    x0, hi = rand(2, 3), tg.asarray(np.int32(n))
    want = ref(x0, xs, hi)
    close(f(x0, xs, hi), want)
    jf = tg.jit(f)
    close(jf(x0, xs, hi), want)
    close(jf(x0, xs, hi), want)   # a replay starts again from the first carry buffers


# ---- training: an RNN with scan under jit(grad) against the unrolled one ----
def test_rnn_trained_with_scan_under_jit_grad_matches_unrolled() -> None:
    rng = np.random.default_rng(0)
    t_len, batch, d_in, hidden = 6, 4, 3, 5
    xs = tg.asarray(rng.standard_normal((t_len, batch, d_in)).astype(f32))
    target = tg.asarray(rng.standard_normal((batch, 1)).astype(f32))
    params = {"wx": rng.standard_normal((d_in, hidden)) * 0.4, "wh": rng.standard_normal((hidden, hidden)) * 0.4,
              "b": np.zeros(hidden), "wo": rng.standard_normal((hidden, 1)) * 0.4}
    params = {k: tg.asarray(v.astype(f32)) for k, v in params.items()}

    def cell(p: dict) -> Callable:
        return lambda h, x: ((h2 := tnp.tanh(x @ p["wx"] + h @ p["wh"] + p["b"])), (h2 @ p["wo"]).mean())

    def loss_scan(p: dict, xs: tg.Tensor, target: tg.Tensor) -> tg.Tensor:
        h, outs = tg.lax.scan(cell(p), tnp.zeros((batch, hidden)), xs)
        return ((h @ p["wo"] - target) ** 2).mean() + (outs ** 2).sum() * 0.01

    def loss_unrolled(p: dict, xs: tg.Tensor, target: tg.Tensor) -> tg.Tensor:
        h, outs = tnp.zeros((batch, hidden)), []
        for t in range(t_len):
            h, o = cell(p)(h, xs[t])
            outs.append(o)
        return ((h @ p["wo"] - target) ** 2).mean() + (tnp.stack(outs) ** 2).sum() * 0.01

    def trainer(loss: Callable) -> Callable:
        @tg.jit
        def step(p: dict, xs: tg.Tensor, target: tg.Tensor) -> tuple:
            value, g = tg.value_and_grad(loss)(p, xs, target)
            return tree_map(lambda w, d: w - 0.1 * d, p, g), value
        return step
    a, b = trainer(loss_scan), trainer(loss_unrolled)
    pa, pb, losses = params, params, []
    for _ in range(15):
        pa, la = a(pa, xs, target)
        pb, lb = b(pb, xs, target)
        close(la, lb)
        close(pa, pb)
        losses.append(float(la.numpy()))
    assert losses[-1] < losses[0] * 0.8
    assert a.trace_count == 1


def _backward_loops(t: tg.Tensor) -> list:
    return [u.arg for u in t.uop.toposort() if u.op.name == "LOOP" and u.arg.name.endswith("_backward")]


def test_recurrent_weight_gradients_are_one_contraction_after_the_loop() -> None:
    """A weight's gradient in a scan's backward, `h_t^T @ dz_t` a step, is not added into an accumulator carry step by
    step (a pass over the weight a step: an LSTM's 256 x 1024 recurrent weight, 32 times) when the step's operands are
    smaller than the weight: they are stacked as the backward's ys and contracted over the steps and the batch after
    it, one matmul. The bias's gradient (a plain sum) is still accumulated; the gradients are the unrolled loop's."""
    rng = np.random.default_rng(1)
    t_len, batch, d_in, hidden = 7, 3, 8, 16
    xs = tg.asarray(rng.standard_normal((t_len, batch, d_in)).astype(f32))
    params = {"wx": rng.standard_normal((d_in, hidden)) * 0.3, "wh": rng.standard_normal((hidden, hidden)) * 0.3,
              "b": rng.standard_normal(hidden) * 0.1}
    params = {k: tg.asarray(v.astype(f32)) for k, v in params.items()}

    def cell(p: dict) -> Callable:
        return lambda h, x: ((h2 := tnp.tanh(x @ p["wx"] + h @ p["wh"] + p["b"])), h2)

    def loss_scan(p: dict) -> tg.Tensor:
        _, hs = tg.lax.scan(cell(p), tnp.zeros((batch, hidden)), xs)
        return (hs ** 3).sum()

    def loss_unrolled(p: dict) -> tg.Tensor:
        h, total = tnp.zeros((batch, hidden)), 0.0
        for t in range(t_len):
            h, o = cell(p)(h, xs[t])
            total = total + (o ** 3).sum()
        return total

    g = tg.grad(loss_scan)(params)
    (loop,) = _backward_loops(g["wh"])
    assert loop.n_carry == 2   # the hidden state's cotangent and the bias's accumulator: no weight's
    (node,) = [u for u in g["wh"].uop.toposort() if u.op.name == "LOOP" and u.arg is loop]
    # its ys: xs's cotangents and dz, once for both weights; h_t and x_t are read from the saved carries and xs
    assert len(node.src[0].src) - loop.n_carry == 2
    import tgfx.transforms.control_grad as control_grad
    budget, control_grad.STACKED_BYTES_MAX = control_grad.STACKED_BYTES_MAX, 1000   # more to stack than it allows:
    try:                                                                              # accumulated as before
        (capped,) = _backward_loops(tg.grad(loss_scan)(params)["wh"])
    finally:
        control_grad.STACKED_BYTES_MAX = budget
    assert capped.n_carry == 4
    want = tg.grad(loss_unrolled)(params)
    for k in params:
        close(g[k], want[k])
    close(tg.jit(tg.grad(loss_scan))(params), want)

    def loss_reversed(p: dict) -> tg.Tensor:   # the stacked operands pair up by step in a reverse scan too
        _, hs = tg.lax.scan(cell(p), tnp.zeros((batch, hidden)), xs, reverse=True)
        return (hs ** 3).sum() + (hs[0] * hs[-1]).sum()

    def loss_reversed_unrolled(p: dict) -> tg.Tensor:
        h, outs = tnp.zeros((batch, hidden)), [None] * t_len
        for t in reversed(range(t_len)):
            h, outs[t] = cell(p)(h, xs[t])
        return (tnp.stack(outs) ** 3).sum() + (outs[0] * outs[-1]).sum()
    close(tg.grad(loss_reversed)(params), tg.grad(loss_reversed_unrolled)(params))


# ---- higher order and forward mode ----
def test_second_order_and_jvp_through_loops() -> None:
    def f(x: tg.Tensor) -> tg.Tensor:
        c, ys = tg.lax.scan(lambda c, r: (tnp.sin(c) * r + c, c * c), x.sum(), x)
        return tg.lax.fori_loop(0, 3, lambda i, v: v * v * 0.3 + v, c) + ys.sum()

    def ref(x: tg.Tensor) -> tg.Tensor:
        c, ys = py_scan(lambda c, r: (tnp.sin(c) * r + c, c * c), x.sum(), x)
        return py_fori(0, 3, lambda i, v: v * v * 0.3 + v, c) + ys.sum()
    x = rand(4) * 0.3
    close(tg.grad(lambda x: tg.grad(f)(x).sum())(x), tg.grad(lambda x: tg.grad(ref)(x).sum())(x), tol=1e-4)
    t = rand(4, seed=7)
    close(tg.jvp(f, (x,), (t,)), tg.jvp(ref, (x,), (t,)), tol=1e-4)


def test_nested_loops_and_grad() -> None:
    w = rand(3, 3) * 0.4

    def inner(c: tg.Tensor, x: tg.Tensor) -> tuple:
        return tnp.tanh(c @ w + x), c.sum()

    def f(x: tg.Tensor, nested: Callable, scan: Callable) -> tg.Tensor:
        def outer(i: tg.Tensor, c: tg.Tensor) -> tg.Tensor:
            h, ys = scan(inner, c, x)
            return h + ys.sum() * 0.01
        return nested(0, 3, outer, x[0]).sum()
    x = rand(4, 3)
    close(f(x, tg.lax.fori_loop, tg.lax.scan), f(x, py_fori, py_scan))
    close(tg.grad(lambda x: f(x, tg.lax.fori_loop, tg.lax.scan))(x), tg.grad(lambda x: f(x, py_fori, py_scan))(x))


def test_value_and_grad_runs_the_forward_loop_once() -> None:
    """The primal result and the backward read one saving forward LOOP (merge_saved_loops)."""
    from tgfx.ir.uop import UOp
    from tgfx.lowering.control import merge_saved_loops
    from tgfx.lowering.inline import inline
    x = rand(4)
    v, g = tg.value_and_grad(lambda x: tg.lax.fori_loop(0, 5, lambda i, c: tnp.sin(c) * c, x).sum())(x)
    sink = merge_saved_loops(inline(UOp(Ops.SINK, None, (v.uop, g.uop))))
    loops = [u for u in sink.toposort() if u.op is Ops.LOOP]
    assert sorted((u.arg.reverse, u.arg.save) for u in loops) == [(False, True), (True, False)]
    close((v, g), tg.value_and_grad(lambda x: py_fori(0, 5, lambda i, c: tnp.sin(c) * c, x).sum())(x))


def test_closure_values_become_loop_invariants() -> None:
    """A body reading a lazy value from outside computes it once, before the loop; its gradient accumulates."""
    x, w = rand(3), rand(3, seed=1)

    def f(w: tg.Tensor) -> tg.Tensor:
        big = tnp.exp(w) * 2.0                 # outside the body: a const of the loop
        return tg.lax.fori_loop(0, 4, lambda i, c: c * big + 1.0, x).sum()

    def ref(w: tg.Tensor) -> tg.Tensor:
        big = tnp.exp(w) * 2.0
        return py_fori(0, 4, lambda i, c: c * big + 1.0, x).sum()
    close(tg.grad(f)(w), tg.grad(ref)(w))
    loop = next(u for u in tg.lax.fori_loop(0, 4, lambda i, c: c * (tnp.exp(w) * 2.0), x).uop.toposort()
                if u.op is Ops.LOOP)
    assert loop.arg.n_consts == 1 and not any(u.op is Ops.BUFFER for u in loop.src[0].toposort())


def test_gradient_with_respect_to_a_constant_valued_input_read_by_a_body() -> None:
    """An input made by `tnp.full` (a constant, no buffer) and read by a loop or branch body from outside: the body's
    literal was the constant, so its gradient never reached the input (zero, silently, for all of these)."""
    b = tnp.full(3, 0.1)
    assert not any(u.op is Ops.BUFFER for u in b.uop.toposort())
    cases = [(lambda b: tg.lax.fori_loop(0, 3, lambda i, z: tnp.tanh(z + b), tnp.zeros(3)).sum(),
              lambda b: py_fori(0, 3, lambda i, z: tnp.tanh(z + b), tnp.zeros(3)).sum()),
             (lambda b: tg.lax.scan(lambda c, _: (c * 0.5 + b, None), tnp.ones(3), None, length=3)[0].sum(),
              lambda b: py_fori(0, 3, lambda i, c: c * 0.5 + b, tnp.ones(3)).sum()),
             (lambda b: tg.lax.cond(True, lambda x: tnp.sin(x + b), lambda x: x, tnp.ones(3)).sum(),
              lambda b: tnp.sin(tnp.ones(3) + b).sum()),
             (lambda b: tg.lax.switch(1, [lambda x: x, lambda x: tnp.sin(x * b)], tnp.ones(3)).sum(),
              lambda b: tnp.sin(b).sum())]
    for f, ref in cases:
        expect = tg.grad(ref)(tg.asarray(np.full(3, 0.1, np.float32))).numpy()   # the same value in a buffer
        assert np.abs(expect).min() > 0.1
        close(tg.grad(f)(b), expect)
        close(tg.jit(tg.grad(f))(b), expect)
        close(tg.jvp(f, (b,), (tnp.ones(3),))[1], expect.sum())


# ---- errors name the user's thing ----
def test_carry_type_changed_by_the_body_is_named() -> None:
    x = tnp.ones(3)
    with pytest.raises(TypeError, match=r"changed the type of carry\['h'\]: it received float32\[3\] and returned "
                                        r"float16\[3\]"):
        tg.lax.fori_loop(0, 3, lambda i, c: {"h": c["h"].astype(tg.dtypes.float16)}, {"h": x})
    with pytest.raises(TypeError, match=r"carry\[1\]: it received float32\[3\] and returned float32\[\]"):
        tg.lax.scan(lambda c, r: ((c[0], c[1].sum()), r), (x, x), tnp.ones((2, 1)))
    with pytest.raises(TypeError, match="structure it received"):
        tg.lax.while_loop(lambda c: c.sum() < 3, lambda c: (c, c), x)


def test_scan_input_errors() -> None:
    with pytest.raises(ValueError, match=r"xs\['a'\] has 3, xs\['b'\] has 4"):
        tg.lax.scan(lambda c, x: (c, x), 0.0, {"a": tnp.ones(3), "b": tnp.ones(4)})
    with pytest.raises(ValueError, match="length="):
        tg.lax.scan(lambda c, x: (c, x), 0.0)
    with pytest.raises(ValueError, match="length=2 but"):
        tg.lax.scan(lambda c, x: (c, x), 0.0, tnp.ones(3), length=2)
    with pytest.raises(TypeError, match="must return a pair"):
        tg.lax.scan(lambda c, x: c, 0.0, tnp.ones(3))


def test_branch_errors() -> None:
    x = tnp.ones(3)
    with pytest.raises(TypeError, match=r"pred must be a scalar .* got shape \(3,\)"):
        tg.lax.cond(x > 0, lambda a: a, lambda a: -a, x)
    with pytest.raises(TypeError, match=r"branch 0 .* float32\[3\] and branch 1 .* float32\[\]"):
        tg.lax.switch(0, [lambda a: a, lambda a: a.sum()], x)
    with pytest.raises(TypeError, match="index must be an integer"):
        tg.lax.switch(0.5, [lambda a: a, lambda a: a], x)
    with pytest.raises(TypeError, match=r"cond_fun .* must return a boolean scalar, got float32\[3\]"):
        tg.lax.while_loop(lambda c: c, lambda c: c, x)


def test_unbounded_while_loop_is_not_reverse_differentiable() -> None:
    with pytest.raises(TypeError, match="max_steps"):
        tg.grad(lambda x: tg.lax.while_loop(lambda c: c.sum() < 10, lambda c: c * 2, x).sum())(tnp.ones(3))


def test_reading_a_carry_inside_the_body_is_a_concretization_error() -> None:
    with pytest.raises(tg.ConcretizationError, match="argument carry"):
        tg.lax.fori_loop(0, 3, lambda i, c: c * 2 if float(c.sum()) > 0 else c, tnp.ones(3))


# ---- placement and composition ----
def test_loops_run_on_the_device_of_their_operands() -> None:
    x = tg.asarray(np.arange(4, dtype=f32), device="CPU:1")

    def body(i: tg.Tensor, c: tg.Tensor) -> tg.Tensor:
        return c @ tnp.ones((4, 4), device="CPU:1") * 0.1 + c    # a constant made for CPU:1 inside the body
    y = tg.lax.fori_loop(0, 3, body, x)
    assert y.device == "CPU:1"
    close(y, py_fori(0, 3, body, x))
    g = tg.grad(lambda x: tg.lax.scan(lambda c, r: (c * r + 1.0, c), 1.0, x)[0])(x)
    assert g.device == "CPU:1"
    x0 = tg.asarray(x.numpy())   # the reference on CPU:0
    close(g, tg.grad(lambda x: py_scan(lambda c, r: (c * r + 1.0, c), 1.0, x)[0])(x0))


def test_loops_compose_with_function_and_precompile() -> None:
    @tg.function(precompile=True)
    def sq(a: tg.Tensor) -> tg.Tensor:
        return a * a + 1.0

    @tg.function
    def inner(a: tg.Tensor) -> tg.Tensor:
        return tg.lax.fori_loop(0, 4, lambda i, c: sq(c) * 0.1 + a, a)
    x = rand(3) * 0.5
    close(inner(x), py_fori(0, 4, lambda i, c: (c * c + 1.0) * 0.1 + x, x))
    close(tg.grad(lambda a: inner(a).sum())(x), tg.grad(lambda a: py_fori(0, 4, lambda i, c: (c * c + 1.0) * 0.1 + a,
                                                                            a).sum())(x))


def test_loop_kernel_threads_large_loops_and_keeps_dtypes() -> None:
    x = np.linspace(-1, 1, 4096).astype(f32)
    ref = x.copy()
    for _ in range(100):
        ref = ref * f32(0.99) + f32(0.01)
    tg.counters.reset()
    close(tg.lax.fori_loop(0, 100, lambda i, c: c * 0.99 + 0.01, tg.asarray(x)), ref)
    assert tg.counters.kernel_count == 1
    h = tg.lax.fori_loop(0, 3, lambda i, c: c * 2, tg.asarray(np.ones(2, np.float16)))
    assert h.dtype == tg.dtypes.float16
    close(h, np.full(2, 8, np.float16))
    empty, full = tg.lax.fori_loop(0, 3, lambda i, c: (c[0] * 2, c[1] + 1), (tnp.zeros((0,)), tnp.ones(2)))
    assert empty.shape == (0,)
    close(full, np.full(2, 4, f32))


@pytest.mark.parametrize("n", [32, 48, 7, 12])
def test_a_loop_kernel_steps_its_elements_as_vector_lanes(n: int) -> None:
    # the elements of an elementwise loop are a vector's lanes (an UPCAST of the element range, the carries vector
    # registers); fewer than a vector's lanes, or not a multiple of them, padded (PADTO, masked lanes: eigh's 12
    # Sturm counts were 12 scalar chains); carries of several dtypes step together, the scanned input read at each
    # step, and the result is the Python loop's
    from tgfx.devices.target import host_target
    from tgfx.lowering import index_level, lower_kernel
    from tgfx.lowering.heuristics import hand_coded_opts
    x = np.linspace(-1, 1, n).astype(f32)
    xs = np.random.default_rng(0).standard_normal((5, n)).astype(f32)

    def body(c: tuple, r: tg.Tensor) -> tuple:
        v, k = c
        v = tnp.where(v > 0, v * 0.9 + r, v - 0.1 * r)
        return (v, k + (v > 0).astype(tg.dtypes.int32)), None
    asts = []
    orig = lower_kernel

    def grab(ast: Any, *a: Any, **kw: Any) -> Any:
        asts.append(ast)
        return orig(ast, *a, **kw)
    import tgfx.lowering as lowering
    lowering.lower_kernel = grab
    try:
        (v, k), _ = tg.jit(lambda x, xs: tg.lax.scan(body, (x, tnp.zeros(n, tg.dtypes.int32)), xs))(
            tg.asarray(x), tg.asarray(xs))
        v, k = v.numpy(), k.numpy()
    finally:
        lowering.lower_kernel = orig
    rv, rk = x.copy(), np.zeros(n, np.int32)
    for r in xs:
        rv = np.where(rv > 0, rv * f32(0.9) + r, rv - f32(0.1) * r)
        rk += (rv > 0)
    np.testing.assert_allclose(v, rv, rtol=1e-6)
    np.testing.assert_array_equal(k, rk)
    loops = {a for a in asts if str(a.arg).startswith("loop_")}
    assert len(loops) == 1, [a.arg for a in asts]
    (loop,) = loops
    lanes = host_target().lanes(4)
    opts = hand_coded_opts(index_level(loop), host_target())
    amount = min(lanes, 1 << (n - 1).bit_length())
    assert [(o.op, o.amount) for o in opts if o.op in ("UPCAST", "PADTO")] == \
        [("PADTO", amount)] * bool(n % amount) + [("UPCAST", amount)], opts


def test_nested_control_flow_under_jit_value_and_grad() -> None:
    """cond, while_loop and fori_loop inside a scan body: blocks inside blocks, memory planned across them."""
    w = rand(3, 3, seed=1) * 0.5

    def make(scan: Callable, cond: Callable, while_loop: Callable, fori: Callable) -> Callable:
        def f(x: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
            def step(c: tg.Tensor, r: tg.Tensor) -> tuple:
                h = cond(r.sum() > 0, lambda a: tnp.tanh(a @ w), lambda a: a * 0.5 - 0.1, c + r)
                g = while_loop(lambda v: (v * v).sum() < 4.0, lambda v: v * 1.3 + 0.05, h * 0.1)
                k = fori(0, 3, lambda i, v: v * 0.9 + g * 0.1, h)
                return k, (g.sum(), k @ w)
            c, (gs, ks) = scan(step, x[0], x)
            return (c * c).sum() + gs.sum() + (ks ** 2).sum()
        return f
    ours = make(tg.lax.scan, tg.lax.cond, lambda c, b, v: tg.lax.while_loop(c, b, v, max_steps=40), tg.lax.fori_loop)
    ref = make(py_scan, lambda p, t, f, a: t(a) if bool(p) else f(a), py_while, py_fori)
    jf = tg.jit(tg.value_and_grad(ours, argnums=(0, 1)))
    for seed in range(2):
        x = rand(6, 3, seed=seed + 3)
        close(jf(x, w), tg.value_and_grad(ref, argnums=(0, 1))(x, w))
    assert jf.trace_count == 1


def test_python_int_of_the_loop_index_is_a_concretization_error_naming_it():
    import pytest

    import tgfx as tg
    with pytest.raises(tg.ConcretizationError, match="loop index"):
        tg.lax.fori_loop(0, 5, lambda i, c: c + int(i), 0.0)


def test_a_loop_computes_what_only_its_constants_give_once() -> None:
    """A scan body's `h @ w` reads w, whose rows are a page long, through a packed copy of it (schedule's
    `_packed_operand`): that kernel reads only the loop's constant w, so it runs once, before the loop's top, and not
    in each step (an LSTM's packed and transposed weights: 2 of 16 ms a train step)."""
    from tgfx.lowering.control import reads, writes
    rng = np.random.default_rng(0)
    w = rng.standard_normal((1024, 1024)).astype(np.float32) / 32
    h0, xs = rng.standard_normal((32, 1024)).astype(np.float32), rng.standard_normal((5, 32, 1024)).astype(np.float32)
    f = tg.jit(lambda w, h0, xs: tg.lax.scan(lambda h, x: (tnp.tanh(h @ w + x), h.sum()), h0, xs))
    h, sums = f(*(tg.device_put(a, "CPU") for a in (w, h0, xs)))   # (the CPU's packing of long rows)
    ((prog, _),) = f._cache.values()
    top = next(i for i, c in enumerate(prog.calls) if c.src[0].op is Ops.LABEL)
    of_w = [i for i, c in enumerate(prog.calls) if c.src[0].op is Ops.SINK and
            set(reads(c)) <= {prog.inputs[0], *writes(c)}]
    assert len(of_w) == 1 and of_w[0] < top
    want, sums_want = h0.astype(np.float64), []
    for x in xs:
        sums_want.append(want.sum())
        want = np.tanh(want @ w + x)
    np.testing.assert_allclose(h.numpy(), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(sums.numpy(), sums_want, rtol=1e-4)

