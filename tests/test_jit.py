"""jit through the public API: trace counts, replay without compiles, static args, donation, pytrees, nesting,
concretization errors, memory planning and the on-disk kernel cache across processes."""
import os
import subprocess
import sys
import textwrap
import threading
import warnings
from typing import Any, NamedTuple

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.devices import DEFAULT_DEVICE
from tgfx.function import ConcretizationError
from tgfx.transforms.jit import DonatedBufferError

# tests of the CPU's compile path and ring: they skip, saying why, when TGFX_DEVICE makes another device the default
on_the_cpu = pytest.mark.skipif(not DEFAULT_DEVICE.startswith("CPU"),
                                reason=f"the CPU's compile path and ring: the default device is {DEFAULT_DEVICE}")


def arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_one_trace_for_repeated_calls_and_no_compiles_on_replay():
    @tg.jit
    def f(x, w):
        return tnp.maximum(x @ w, 0).sum(axis=1)
    w = tg.asarray(arr(4, 3))
    f(tg.asarray(arr(2, 4)), w).numpy()
    tg.counters.reset()
    for s in range(3):
        x = arr(2, 4, seed=s + 1)
        np.testing.assert_allclose(f(tg.asarray(x), w).numpy(), np.maximum(x @ arr(4, 3), 0).sum(1), rtol=1e-5)
    assert f.trace_count == 1
    assert tg.counters.compile_count == 0 and tg.counters.schedule_count == 0


def test_lazy_arguments_of_a_first_call_are_computed_in_one_schedule():
    """Arguments still lazy at a first call (an optimiser's zero moments, one per parameter shape) are computed
    together, one schedule whose kernels compile side by side, not a program each compiled one after another; the
    program traced then reads them as it would have."""
    xs = [arr(3, seed=1), arr(4, 5, seed=2), arr(6, 7, 2, seed=3)]
    lazy = [tg.asarray(x) * 3.0 for x in xs]
    f = tg.jit(lambda a, b, d: a.sum() + b.sum() * 2 + d.sum() * 3)
    tg.counters.reset()
    out = f(*lazy)
    assert tg.counters.schedule_count == 2   # the arguments' one, and the traced function's
    np.testing.assert_allclose(out.numpy(), 3 * (xs[0].sum() + 2 * xs[1].sum() + 3 * xs[2].sum()), rtol=1e-5)
    np.testing.assert_allclose(lazy[1].numpy(), xs[1] * 3, rtol=1e-6)   # and the arguments hold their values


@pytest.mark.x64
def test_retraces_on_new_shape_dtype_and_static_value(capsys):
    @tg.jit(static_argnums=1)
    def f(x, n):
        return x * n
    f(tg.asarray(arr(3)), 2)
    f(tg.asarray(arr(3)), 2)
    assert f.trace_count == 1
    with tg.Context(TGFX_LOG_RETRACE=1):
        f(tg.asarray(arr(5)), 2)
        f(tg.asarray(arr(5).astype(np.float64)), 2)
        out = f(tg.asarray(arr(5)), 3)
    assert f.trace_count == 4
    log = capsys.readouterr().out
    assert "x: shape (3,) -> (5,)" in log and "x: dtype float32 -> float64" in log and "static n: 2 -> 3" in log
    np.testing.assert_allclose(out.numpy(), arr(5) * 3)


def test_static_argnames_and_kwargs():
    @tg.jit(static_argnames="axis")
    def f(x, axis=0):
        return x.sum(axis=axis)
    x = arr(3, 4)
    np.testing.assert_allclose(f(tg.asarray(x), axis=1).numpy(), x.sum(1), rtol=1e-6)
    np.testing.assert_allclose(f(tg.asarray(x), axis=0).numpy(), x.sum(0), rtol=1e-6)
    assert f.trace_count == 2


def test_python_side_effects_happen_only_when_tracing():
    calls = []

    @tg.jit
    def f(x):
        calls.append(1)
        return x + 1
    for _ in range(3):
        f(tg.asarray(arr(2)))
    assert len(calls) == 1


def test_pytrees_in_and_out():
    @tg.jit
    def step(params, batch):
        y = batch["x"] @ params["w"] + params["b"]
        return {"loss": ((y - batch["y"]) ** 2).mean(), "y": y}
    p = {"w": tg.asarray(arr(3, 2)), "b": tg.asarray(arr(2))}
    b = {"x": tg.asarray(arr(4, 3)), "y": tg.asarray(arr(4, 2))}
    out = step(p, b)
    y = arr(4, 3) @ arr(3, 2) + arr(2)
    np.testing.assert_allclose(out["y"].numpy(), y, rtol=1e-5)
    np.testing.assert_allclose(out["loss"].item(), ((y - arr(4, 2)) ** 2).mean(), rtol=1e-5)


def test_concretization_error_names_the_argument_and_line():
    @tg.jit
    def f(x, y):
        if (y > 0).all():  # a Python branch on a traced value
            return x
        return -x
    with pytest.raises(ConcretizationError, match=r"argument y .*test_jit.py:\d+ .*static_argnums"):
        f(tg.asarray(arr(2)), tg.asarray(arr(2)))
    with pytest.raises(ConcretizationError, match="argument x"):
        tg.jit(lambda x: float(x.sum()))(tg.asarray(arr(2)))


def test_outputs_do_not_alias_inputs():
    f = tg.jit(lambda x: x)
    x = tg.asarray(arr(3))
    y = f(x)
    assert y.uop is not x.uop
    np.testing.assert_array_equal(y.numpy(), arr(3))


def test_donated_input_is_reused_and_invalid_afterwards():
    @tg.jit(donate_argnums=0)
    def update(w, g):
        return w - 0.5 * g
    w, g = tg.asarray(arr(8)), tg.asarray(arr(8, seed=1))
    w.numpy()
    uid = w.uop.arg[0]   # (by its number: a reference to the node would hold it, and the call would take a copy)
    w2 = update(w, g)
    np.testing.assert_allclose(w2.numpy(), arr(8) - 0.5 * arr(8, seed=1), rtol=1e-6)
    assert w2.uop.op is tg.Ops.BUFFER and w2.uop.arg[0] == uid   # the donated buffer was written in place
    with pytest.raises(DonatedBufferError):
        w.numpy()
    w3 = update(w2, g)
    np.testing.assert_allclose(w3.numpy(), arr(8) - 1.0 * arr(8, seed=1), rtol=1e-6)


def test_lazy_values_read_from_a_donated_buffer_keep_the_values_they_were_built_from():
    # JAX computes `y` when it is written; tgfx computes it before the donating call takes the buffer over (it read
    # the call's result: [3., 3.] for [2., 2.])
    w = tg.asarray(arr(4))
    w.numpy()
    y, row = w + 1.0, w.reshape(2, 2)[1] * 10.0
    w2 = tg.jit(lambda w: w * 2.0, donate_argnums=0)(w)
    np.testing.assert_allclose(y.numpy(), arr(4) + 1.0, rtol=1e-6)
    np.testing.assert_allclose(row.numpy(), arr(4)[2:] * 10.0, rtol=1e-6)
    np.testing.assert_allclose(w2.numpy(), arr(4) * 2.0, rtol=1e-6)


def test_views_of_a_donated_tensor_keep_the_values_they_were_taken_from():
    # JAX's `x[3]`, `x.reshape(2, 4)`, `jnp.array(x)` are arrays of their own; tgfx's are views of x's buffer until
    # read, and they read the donating call's result ([-100.] for [5.]) when the call wrote it in place: the call
    # takes over a copy instead
    d = tg.jit(lambda v: v * 0 - 100, donate_argnums=0)
    x = tg.asarray(np.full(8, 5.0, np.float32))
    x.numpy()
    views = [x.reshape(2, 4), x[3], x[2:6], x[None], tnp.array(x), x.reshape(1, 8).squeeze(0)]
    out = d(x)
    np.testing.assert_array_equal(out.numpy(), np.full(8, -100.0, np.float32))
    for v in views:
        np.testing.assert_array_equal(v.numpy().reshape(-1), np.full(v.size, 5.0, np.float32))
    w = tg.asarray(np.full(8, 5.0, np.float32))   # with no view left, the buffer is still taken over in place
    w.numpy()
    uid = w.uop.arg[0]
    assert d(w).uop.arg[0] == uid


def test_another_tensor_of_a_donated_tensors_own_node_keeps_its_value():
    # `tnp.array(x)` and `x.reshape(3, 4).reshape(12)` of a 1-D x are Tensors of x's very BUFFER node (hash-consing
    # folds the reshapes back): they read the donating call's result afterwards. Such a holder makes the call take
    # over a copy; a buffer only the donated Tensor holds is still written in place (no allocation)
    d = tg.jit(lambda v: v * 0 - 100, donate_argnums=0)
    for alias in (lambda x: tnp.array(x), lambda x: x.reshape(3, 4).reshape(12)):
        x = tg.asarray(np.full(12, 5.0, np.float32))
        other = alias(x)
        assert other is not x and other.uop is x.uop
        assert d(x).tolist() == [-100.0] * 12
        assert other.tolist() == [5.0] * 12
    w = tg.asarray(np.full(12, 5.0, np.float32))
    for _ in range(3):   # params = step(params), its first input made by asarray, the others by the call before
        tg.counters.reset()
        w = d(w)
        assert tg.counters.alloc_count == 0


def test_buffers_taken_over_by_donating_calls_are_freed_once_dropped():
    # the log of donated buffers (tensor.DonationLog, which a read on another thread checks) kept the last 1,024
    # alive, and their memory with them
    import gc

    from tgfx.ir.uop import buffers
    d = tg.jit(lambda v: v * 2, donate_argnums=0)

    def step(view: bool) -> None:
        w = tg.asarray(np.ones((16, 16), np.float32))
        v = w[1] if view else None   # noqa: F841 -- held: the call takes over a copy
        d(w).block_until_ready()
    for view in (False, True):
        step(view)
        gc.collect()
        live = len(buffers)
        for _ in range(100):
            step(view)
        gc.collect()
        assert len(buffers) <= live + 2


def _donating_meanwhile(x: tg.Tensor) -> tg.Tensor:
    """x donated to a jitted call by another thread (run to its end here), as that thread would while this one
    reads x: what a read queued after it finds in x's buffer is the call's result, -100."""
    out = []
    thread = threading.Thread(target=lambda: out.append(tg.jit(lambda v: v * 0 - 100, donate_argnums=0)(x)))
    thread.start()
    thread.join()
    return out[0]


def test_a_read_queued_after_another_threads_donation_of_its_buffer_is_not_its_value(monkeypatch):
    # a thread that took x's buffer to read it (a replay, an eager graph) while another donated x queued its read
    # after the donating call's writes: it returned the call's result as x's value. Each read here is made to come
    # in that order; the replay raises or reads x's value, and an eager value built from x before the donation is the
    # one the donating call computed first (realize_readers)
    import tgfx._realize as tensor_module
    from tgfx.lowering.program import Program
    g = tg.jit(lambda v: v + 1)
    x = tg.asarray(np.full(8, 5.0, np.float32))
    g(x).numpy()
    execute = Program.execute

    def donated_first(self, *args):
        monkeypatch.setattr(Program, "execute", execute)
        _donating_meanwhile(x)
        return execute(self, *args)
    monkeypatch.setattr(Program, "execute", donated_first)
    try:                                            # a replay: it got [-99.]
        got = g(x).tolist()
    except DonatedBufferError:                      # (the donation came after the read took the buffer)
        got = None
    assert got in (None, [6.0] * 8)                 # (or it took over a copy: the read held the buffer)

    x = tg.asarray(np.full(8, 5.0, np.float32))
    x.numpy()
    y = x + 1
    lower_realize = tensor_module.lower_realize

    def donated_before(*args):
        monkeypatch.setattr(tensor_module, "lower_realize", lower_realize)
        _donating_meanwhile(x)
        return lower_realize(*args)
    monkeypatch.setattr(tensor_module, "lower_realize", donated_before)
    np.testing.assert_array_equal(y.numpy(), np.full(8, 6.0, np.float32))   # it got [-99.]



def test_nested_jit_inlines_the_inner_function():
    inner = tg.jit(lambda x: x * 2)

    @tg.jit
    def outer(x):
        return inner(x) + 1
    tg.counters.reset()
    np.testing.assert_allclose(outer(tg.asarray(arr(4))).numpy(), arr(4) * 2 + 1, rtol=1e-6)
    assert inner.trace_count == 0 and outer.trace_count == 1
    assert tg.counters.kernel_count == 1  # fused across the inner boundary


def test_a_transform_of_a_jitted_function_called_eagerly_traces_it_once():
    # `grad(jit(f))` and `vmap(jit(f))` in an eager loop: JAX caches the jitted function's trace and its transformed
    # form; here each call is the jitted transform, replayed (it traced `f` again every call: 1-2 ms a call)
    traced = []

    @tg.jit
    def loss(w, x):
        traced.append(1)
        return (tnp.tanh(x @ w) ** 2).sum()
    w, xs = arr(4, 3), [arr(5, 4, seed=s) for s in range(3)]

    def ref_grad(w, x):
        t = np.tanh(x @ w)
        return x.T @ (2 * t * (1 - t * t))
    for x in xs:   # a new grad(...) object each call, as a loop body writes it
        np.testing.assert_allclose(tg.grad(loss)(tg.asarray(w), tg.asarray(x)).numpy(), ref_grad(w, x), rtol=1e-5)
        value, g = tg.value_and_grad(loss, argnums=1)(tg.asarray(w), x)
        np.testing.assert_allclose(value.numpy(), (np.tanh(x @ w) ** 2).sum(), rtol=1e-5)
        batched = tg.vmap(loss, in_axes=[None, 0])(tg.asarray(w), tg.asarray(np.stack([x, 2 * x])))
        np.testing.assert_allclose(batched.numpy(), [(np.tanh(x @ w) ** 2).sum(), (np.tanh(2 * x @ w) ** 2).sum()],
                                   rtol=1e-5)
    assert len(traced) == 3 and loss.trace_count == 0   # once per transform; `loss` itself was never called
    tg.grad(loss)(tg.asarray(w), tg.asarray(arr(6, 4)))    # a new shape traces again
    assert len(traced) == 4
    inside = tg.jit(lambda w, x: tg.grad(loss)(w, x) * 2)   # under another trace: inlined as before
    np.testing.assert_allclose(inside(tg.asarray(w), tg.asarray(xs[0])).numpy(), 2 * ref_grad(w, xs[0]), rtol=1e-5)
    assert len(traced) == 5
    static = tg.jit(lambda w, x, n: (tnp.tanh(x @ w) ** n).sum(), static_argnums=2)   # positions of f's arguments:
    np.testing.assert_allclose(tg.grad(static)(tg.asarray(w), xs[0], 2).numpy(), ref_grad(w, xs[0]), rtol=1e-5)
    with pytest.raises(TypeError, match="argument 0 has dtype int32"):   # the transform's own errors, unchanged
        tg.grad(loss)(tnp.arange(12).reshape(4, 3), xs[0])


def test_methods():
    class Model:
        def __init__(self, k):
            self.k = k

        @tg.jit
        def __call__(self, x):
            return x * self.k
    m = Model(3.0)
    np.testing.assert_allclose(m(tg.asarray(arr(2))).numpy(), arr(2) * 3)


def test_memory_planning_reuses_intermediate_buffers():
    @tg.jit
    def chain(x, w):
        for _ in range(6):  # each layer's output is read only by the next layer
            x = tnp.tanh(x @ w)
        return x
    x, w = arr(16, 32), arr(32, 32) / 6
    out = chain(tg.asarray(x), tg.asarray(w)).numpy()
    ref = x
    for _ in range(6):
        ref = np.tanh(ref @ w)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    rep = chain.memory_report()
    assert rep["planned_bytes"] <= rep["unplanned_bytes"] // 2


def test_disk_cache_reused_across_processes_and_corrupt_entries_recompiled(tmp_path):
    code = textwrap.dedent("""
        import numpy as np, tgfx as tg, tgfx.numpy as tnp
        f = tg.jit(lambda x: tnp.tanh(x @ x.T).sum(axis=0))
        x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
        out = f(tg.asarray(x)).numpy()
        assert np.allclose(out, np.tanh(x @ x.T).sum(0), atol=1e-6), out
        print(tg.counters.compile_count)
    """)
    env = {**os.environ, "TGFX_CACHE_DIR": str(tmp_path)}

    def run() -> int:
        return int(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                  check=True).stdout.strip())
    assert run() >= 1
    assert run() == 0
    entries = sorted(tmp_path.rglob("*.obj"))
    assert entries
    entries[0].write_bytes(entries[0].read_bytes()[:40])  # truncated
    if len(entries) > 1:
        data = bytearray(entries[1].read_bytes())
        data[-5] ^= 0xFF  # corrupted
        entries[1].write_bytes(bytes(data))
    assert run() == min(len(entries), 2)
    assert run() == 0


def test_profile_writes_a_chrome_trace_with_every_kernel(tmp_path):
    import json
    f = tg.jit(lambda x: tnp.exp(x - x.max()).sum())
    path = tmp_path / "trace.json"
    with tg.profile(str(path)):
        for _ in range(3):
            f(tg.asarray(arr(64))).block_until_ready()
    events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat", "") != "copy" and "copy" not in e["name"]]
    assert len(kernels) >= 3 * 2  # two kernels (the max, then exp-sum) per call
    assert all(e["dur"] >= 0 for e in kernels)


def test_ten_thousand_replays_keep_resident_memory_flat():
    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    step = tg.jit(lambda w, g: w - 0.01 * g)
    w, g = tg.asarray(arr(4096)), tg.asarray(arr(4096, seed=1))
    for _ in range(500):
        w = step(w, g)
    w.block_until_ready()
    before = rss()
    for _ in range(10_000):
        w = step(w, g)
    w.block_until_ready()
    assert rss() - before < 16 << 20  # each call allocates a 16 KiB output: leaking them would be ~160 MiB
    np.testing.assert_allclose(w.numpy(), arr(4096) - 0.01 * 10_500 * arr(4096, seed=1), rtol=1e-3, atol=1e-3)


@on_the_cpu
def test_prelower_compiles_each_kernel_once_off_the_main_thread():
    # a program's kernels are compiled on a worker thread while the next is lowered; every kernel still compiles
    # exactly once and the program gives the right answer
    import threading

    from tgfx.lowering import compile as compile_mod
    threads = set()
    real = compile_mod.compile_llvm

    def spy(ir, candidate=False, target=None):
        threads.add(threading.current_thread().name)
        return real(ir, candidate, target)
    x = np.random.default_rng(3).standard_normal((33, 17)).astype(np.float32)
    f = tg.jit(lambda a: (tnp.exp(a) / tnp.exp(a).sum(axis=1, keepdims=True)).T @ a + 0.123)
    tg.counters.reset()
    compile_mod.compile_llvm = spy   # (the compile queue's threads call it: `compile.CompileQueue`)
    try:
        out = f(tg.asarray(x)).numpy()
    finally:
        compile_mod.compile_llvm = real
    e = np.exp(x)
    np.testing.assert_allclose(out, (e / e.sum(1, keepdims=True)).T @ x + 0.123, rtol=1e-4, atol=1e-5)
    assert tg.counters.compile_count == tg.counters.kernel_count >= 2
    assert any(t.startswith("tgfx-compile") for t in threads)


def test_tiny_replays_run_inline_and_recycle_dropped_results():
    # a tiny program runs on the calling thread (the ring never sees it) and, once warm, a loop that keeps one
    # result at a time allocates nothing: the results of the call before last are reused
    from tgfx.devices import get_device
    from tgfx.devices.hcq import Engine
    ring = get_device("CPU:0").processors[Engine.COMPUTE].ring
    f = tg.jit(lambda v: (v * 2 + 1).reshape(4, 4))
    x = tg.asarray(np.arange(16, dtype=np.float32))
    g = tg.jit(lambda v: v * 2 + 1)
    box, y = [None], x
    for _ in range(3):                     # warm: the trace, then two replays fill the pool
        box[0], y = f(x), g(y)
    before = ring.wptr
    tg.counters.reset()
    for _ in range(10):
        box[0] = f(x)
    for _ in range(5):
        y = g(y)
    assert ring.wptr == before
    assert tg.counters.alloc_count == 0 and tg.counters.kernel_count == 15
    np.testing.assert_array_equal(box[0].numpy(), (np.arange(16) * 2 + 1).reshape(4, 4))
    want = np.arange(16, dtype=np.float32)
    for _ in range(8):
        want = want * 2 + 1
    np.testing.assert_array_equal(y.numpy(), want)


def test_recycling_never_overwrites_a_result_something_still_holds():
    f = tg.jit(lambda v: v + 1)
    kept, lazy, views = [], [], []
    for i in range(6):
        y = f(tg.asarray(np.full(4, i, np.float32)))
        if i % 3 == 0:
            kept.append(y)                 # a Tensor
        elif i % 3 == 1:
            lazy.append(y * 10)            # a graph not yet computed that reads it
        else:
            views.append(y[1:])            # a view of it
        del y
    for i in range(20):                    # plenty of chances to reuse whatever was dropped
        f(tg.asarray(np.full(4, 100 + i, np.float32)))
    assert [t.tolist() for t in kept] == [[1.0] * 4, [4.0] * 4]
    assert [t.tolist() for t in lazy] == [[20.0] * 4, [50.0] * 4]
    assert [t.tolist() for t in views] == [[3.0] * 3, [6.0] * 3]


def test_eager_loops_reuse_dropped_results():
    # eager code runs through the same programs: a loop that keeps one result allocates nothing once warm
    x = tg.asarray(np.arange(64, dtype=np.float32))
    y = x
    for _ in range(3):
        y = y * 0.5 + 1
    tg.counters.reset()
    for _ in range(10):
        y = y * 0.5 + 1
    assert tg.counters.alloc_count == 0 and tg.counters.compile_count == 0
    want = np.arange(64, dtype=np.float32)
    for _ in range(13):
        want = want * 0.5 + 1
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)


@on_the_cpu
def test_a_program_over_the_inline_size_goes_through_the_ring():
    from tgfx.devices import get_device
    from tgfx.devices.hcq import Engine
    ring = get_device("CPU:0").processors[Engine.COMPUTE].ring
    x = arr(64)
    with tg.Context(TGFX_INLINE_BYTES=0):  # traced while nothing counts as tiny
        f = tg.jit(lambda v: tnp.exp(v) * 2)
        f(tg.asarray(x)).block_until_ready()
    xt = tg.asarray(x)
    before = ring.wptr
    tg.counters.reset()
    outs = [f(xt) for _ in range(3)]
    assert ring.wptr > before
    assert tg.counters.alloc_count == 2     # the third call recycles the first call's result, dropped at once
    for o in outs:
        np.testing.assert_allclose(o.numpy(), np.exp(x) * 2, rtol=1e-6)


def test_threads_replaying_one_program_get_their_own_results():
    # the encoded words and the recycled results are shared by every caller: replays from several threads (switching
    # as often as the interpreter allows) must neither mix up their buffers nor share a recycled result
    from helpers import run_threads
    f = tg.jit(lambda v: v * 3 + 1)
    xs = [tg.asarray(np.full(8, t, np.float32)) for t in range(4)]
    f(xs[0]).block_until_ready()
    wrong: list[tuple[int, list[float]]] = []

    def worker(t: int) -> None:
        for _ in range(500):
            y = f(xs[t])
            got = y.tolist()
            if got != [3.0 * t + 1] * 8:
                wrong.append((t, got))

    assert run_threads(worker, 4, switch_interval=1e-6, timeout=60) and not wrong


def test_a_training_loop_recycles_its_parameters_up_to_the_size_bound(monkeypatch):
    # params = step(params): the parameters of the call before last are dropped by then, so a replay writes into
    # them instead of allocating; a program whose outputs exceed RECYCLE_BYTES allocates every call instead
    import tgfx.lowering.program as program_module

    def loss(p, x):
        return ((x @ p["w"] + p["b"]) ** 2).mean()

    def make_step():
        return tg.jit(lambda p, x: tg.tree.tree_map(lambda a, g: a - 0.1 * g, p, tg.grad(loss)(p, x)))
    x = tg.asarray(arr(32, 64))
    p0 = {"w": arr(64, 64, seed=1), "b": arr(64, seed=2)}
    want = {k: v.copy() for k, v in p0.items()}
    for _ in range(8):                     # the same loop in numpy
        h = x.numpy() @ want["w"] + want["b"]
        g = 2 * h / h.size
        want = {"w": want["w"] - 0.1 * x.numpy().T @ g, "b": want["b"] - 0.1 * g.sum(0)}
    for bound, allocs in ((program_module.RECYCLE_BYTES, 0), (0, 2 * 5)):
        monkeypatch.setattr(program_module, "RECYCLE_BYTES", bound)
        step = make_step()
        p = {k: tg.asarray(v) for k, v in p0.items()}
        for _ in range(3):
            p = step(p, x)
        tg.counters.reset()
        for _ in range(5):
            p = step(p, x)
        assert tg.counters.alloc_count == allocs
        for k in want:
            np.testing.assert_allclose(p[k].numpy(), want[k], rtol=1e-4, atol=1e-5)


def test_repeated_result_beside_a_reshaped_one() -> None:
    """A result returned twice is one output buffer: the results after it are viewed from their own buffers (the
    sharding check viewed the per-result list by output index, reshaping the wrong buffer: a SpecError)."""
    def f(v: tg.Tensor) -> tuple:
        a = tnp.arange(2) * 1
        return a, a, (v * 3).reshape(1, 1)
    a, b, c = tg.jit(f)(tg.asarray(np.array([[2.0]], np.float32)))
    assert a.tolist() == b.tolist() == [0, 1] and c.tolist() == [[6.0]]


def test_pytree_and_scalar_replays_take_the_fast_path_and_match_the_general_one(monkeypatch):
    import tgfx.transforms.jit as jit_module

    @tg.jit
    def step(i, state, opts=None):
        w, (v, scale) = state["w"], state["v"]
        out = {"w": w - 0.5 * i * v, "v": (v * scale, scale)}
        return out, (None if opts is None else opts["bias"] + w.sum())

    rng = np.random.default_rng(0)
    w0, v0 = rng.standard_normal(5).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    state = {"v": (tg.asarray(v0), 0.5), "w": tg.asarray(w0)}
    step(0, state)                                   # traces; the next call finds its fast signature
    calls = []
    real_flatten = jit_module.tree_flatten
    monkeypatch.setattr(jit_module, "tree_flatten", lambda *a, **k: calls.append(1) or real_flatten(*a, **k))
    w, v = w0.copy(), v0.copy()
    for i in range(1, 6):                            # new int values each call, dict given in another key order
        state, none = step(i, {"w": state["w"], "v": (state["v"][0], 0.5)})
        w, v = w - 0.5 * i * v, v * np.float32(0.5)
        assert none is None
    np.testing.assert_allclose(state["w"].numpy(), w, rtol=1e-5)
    np.testing.assert_allclose(state["v"][0].numpy(), v, rtol=1e-5)
    assert calls == [] and step.trace_count == 1      # no PyTreeDef built, no retrace
    _, b = step(1, state, opts={"bias": 2.0})         # kwargs: a new signature, then fast too
    _, b = step(1, state, opts={"bias": -1.0})
    assert step.trace_count == 2
    np.testing.assert_allclose(b.numpy(), -1.0 + state["w"].numpy().sum(), rtol=1e-5)
    with pytest.raises(OverflowError, match="argument 0"):   # out of int32: still the general path's message
        step(2**40, state)
    same = tg.asarray(v0)                              # one Tensor passed twice into a program traced with two
    out, _ = step(1, {"w": same, "v": (same, 0.5)})
    np.testing.assert_allclose(out["w"].numpy(), v0 - 0.5 * v0, rtol=1e-5)


def test_numpy_array_arguments_take_the_fast_path_and_trace_as_tensors(monkeypatch):
    """A batch given as numpy arrays (`step(params, xs[i:i + b], ys[i:i + b])`) replays without building a PyTreeDef,
    with the trace of the Tensors they become (float64 host data is float32 without x64, as a Tensor made of it)."""
    import tgfx.transforms.jit as jit_module

    @tg.jit
    def correct(w, x, y):
        return (tnp.argmax(x @ w, -1) == y).sum()
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 3)).astype(np.float32)
    xs, ys = rng.standard_normal((40, 6)).astype(np.float32), rng.integers(0, 3, 40).astype(np.int32)
    correct(tg.asarray(w), tg.asarray(xs[:8]), tg.asarray(ys[:8]))
    calls = []
    real_flatten = jit_module.tree_flatten
    monkeypatch.setattr(jit_module, "tree_flatten", lambda *a, **k: calls.append(1) or real_flatten(*a, **k))
    for i in range(0, 40, 8):
        got = correct(tg.asarray(w), xs[i:i + 8], ys[i:i + 8])
        assert int(got) == int((np.argmax(xs[i:i + 8] @ w, -1) == ys[i:i + 8]).sum())
    assert calls == [] and correct.trace_count == 1
    with warnings.catch_warnings():   # (tgfx says once per process that float64 becomes float32)
        warnings.simplefilter("ignore")
        correct(w.astype(np.float64), xs[:8], ys[:8])   # float64 host data: float32, the same trace
    assert correct.trace_count == 1
    with pytest.raises(ValueError, match="contraction dimension mismatch"):
        correct(w, xs[:8, :5].copy(), ys[:8])          # another shape: traced, and the trace's own error


def test_an_optimizer_state_namedtuple_takes_the_fast_path(monkeypatch):
    """A NamedTuple argument (`tg.optim.AdamState`, an optax-style state) replays without building a PyTreeDef,
    and keeps its type; one registered as a pytree of its own goes through its registration (the general path)."""
    import tgfx.transforms.jit as jit_module

    @tg.jit
    def step(params, state):
        updates, state = tg.optim.adam(0.1).update(params, state, params)
        return tg.optim.apply_updates(params, updates), state

    params = [tg.asarray(np.ones(3, np.float32))]
    state = tg.optim.adam(0.1).init(params)
    for _ in range(2):   # (the fresh state's moments are one zeros buffer: its own signature)
        params, state = step(params, state)
    traces = step.trace_count
    calls = []
    real_flatten = jit_module.tree_flatten
    monkeypatch.setattr(jit_module, "tree_flatten", lambda *a, **k: calls.append(1) or real_flatten(*a, **k))
    for _ in range(3):
        params, state = step(params, state)
    assert calls == [] and step.trace_count == traces and type(state) is tg.optim.AdamState
    assert int(state.count) == 5

    class Pair(NamedTuple):
        a: Any
        b: Any
    tg.tree.register_pytree_node(Pair, lambda p: ((p.b,), None), lambda _aux, cs: Pair(0.0, cs[0]))
    swap = tg.jit(lambda p: p.b * 2)
    x = tg.asarray(np.float32(3))
    for _ in range(2):
        assert float(swap(Pair(1.0, x))) == 6.0   # only .b is a leaf, per the registration


@on_the_cpu
def test_compiles_beside_the_lowering_get_the_gil_back_quickly():
    """While prelower's compile threads run, a thread holds the GIL at most COMPILE_SWITCH_S when another waits
    (each llvmlite call gives it up and must take it back); the interval is the user's again afterwards."""
    import sys

    from tgfx.lowering import COMPILE_SWITCH_S, quick_gil_handoff
    from tgfx.lowering import compile as compile_mod
    seen = []
    real = compile_mod.compile_llvm

    def spy(ir, candidate=False, target=None):
        seen.append(sys.getswitchinterval())
        return real(ir, candidate, target)
    before = sys.getswitchinterval()
    f = tg.jit(lambda a: (tnp.exp(a) / tnp.exp(a).sum(axis=1, keepdims=True)).T @ a - 0.377)
    compile_mod.compile_llvm = spy   # (the compile queue's threads call it: `compile.CompileQueue`)
    try:
        f(tg.asarray(np.ones((7, 5), np.float32))).numpy()
    finally:
        compile_mod.compile_llvm = real
    assert min(before, COMPILE_SWITCH_S) in seen   # the program's kernels, compiled by prelower
    assert sys.getswitchinterval() == before
    with quick_gil_handoff():
        with quick_gil_handoff():
            assert sys.getswitchinterval() == min(before, COMPILE_SWITCH_S)
        assert sys.getswitchinterval() == min(before, COMPILE_SWITCH_S)   # the outer one still holds
    assert sys.getswitchinterval() == before


def test_tracing_pauses_the_garbage_collector_and_gives_it_back_as_it_was():
    """Tracing and lowering allocate nodes by the ten thousand (acyclic, freed by reference counts), so the cyclic
    collector is off while a jitted function is traced and compiled, and afterwards as the user had it."""
    import gc

    from tgfx.lowering import gc_paused
    seen = []

    @tg.jit
    def f(x):
        seen.append(gc.isenabled())
        return x * 2 + 1

    assert gc.isenabled()
    f(tg.asarray(np.ones(3, np.float32)))
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        f(tg.asarray(np.ones(4, np.float32)))   # a new shape: traced again
        assert seen == [False, False] and not gc.isenabled()
    finally:
        gc.enable()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()   # the outer pause still holds
    assert gc.isenabled()


def test_results_computed_from_weak_values_are_weakly_typed_as_in_jax():
    # jax 0.10.2: jit(lambda x: x * 2)(3.0) is ~float32[]; such a result defers to a float16 array, as a Python
    # number does (it made float16 + f(3.0) float32 before); a strongly typed result (a reduction, astype) does not
    half = tnp.asarray(np.array([1.5, 2.5], np.float16))
    f = tg.jit(lambda x: x * 2)
    for _ in range(2):   # the trace's result, then the replay's
        assert str(tg.typeof(f(3.0))) == "~float32[]" and str(tg.typeof(f(3))) == "~int32[]"
        out = half + f(3.0)
        assert out.dtype == tnp.float16 and out.tolist() == [7.5, 8.5]
    both = tg.jit(lambda x: (tnp.sin(x), tnp.where(x > 0, x, 0.0), tnp.clip(x, 0.0, 1.0), -x, x.sum(), x.astype(float)))
    assert [str(tg.typeof(t)) for t in both(3.0)] == ["~float32[]"] * 4 + ["float32[]"] * 2
    mixed = tg.jit(lambda x, y: (x + y, x))
    assert [str(tg.typeof(t)) for t in mixed(3.0, half)] == ["float16[2]", "~float32[]"]
    nested = tg.jit(lambda x: tg.jit(lambda y: y + 1.0)(x) + half)   # an inner jit's weak result, inlined
    assert nested(1.0).dtype == tnp.float16


def test_a_weakly_typed_array_argument_is_traced_weakly_typed():
    # as JAX's: jit(lambda x: x + h)(jnp.asarray(2.0)) is float16 for a float16 h; the weak and the strong float32
    # argument are two signatures
    half = tnp.asarray(np.array([1.5, 2.5], np.float16))
    f = tg.jit(lambda x: x + half)
    assert f(tnp.asarray(2.0)).dtype == tnp.float16 and f(tnp.asarray(2.0)).tolist() == [3.5, 4.5]
    assert f(tnp.asarray(np.float32(2.0))).dtype == tnp.float32
    assert f.trace_count == 2
    g = tg.jit(lambda x: x * 3)
    assert str(tg.typeof(g(tnp.asarray(2.0)))) == "~float32[]" and str(tg.typeof(g(tnp.ones(())))) == "float32[]"


def test_a_hot_signature_outlives_a_cache_size_of_others_and_keywords_are_their_own_signatures():
    from tgfx.config import Context
    with Context(TGFX_JIT_CACHE_SIZE=2):
        f = tg.jit(lambda a, b=None: a * 2 if b is None else a * 2 - 3 * b)
        hot = tg.asarray(np.arange(3, dtype=np.float32))
        np.testing.assert_allclose(f(hot).numpy(), [0, 2, 4])
        for n in (4, 5, 6):   # each a new signature, the hot one called between them: it stays the most recent
            f(tg.asarray(np.ones(n, np.float32)))
            np.testing.assert_allclose(f(hot).numpy(), [0, 2, 4])
        assert f.trace_count == 4
        # the same leaves positionally and by keyword are two signatures (and two traces), each its own answer
        np.testing.assert_allclose(f(hot, hot).numpy(), [0, -1, -2])
        np.testing.assert_allclose(f(hot, b=hot).numpy(), [0, -1, -2])
        np.testing.assert_allclose(f(hot, b=2 * hot).numpy(), [0, -4, -8])
        assert f.trace_count == 6


def test_static_argnames_passed_by_position_and_argnums_by_name():
    # JAX pairs each static argument's position with its name through the signature: `n` named static and passed by
    # position is a Python int inside (range(n) works), and a static position passed by keyword is static too
    @tg.jit(static_argnames="n")
    def g(x, n):
        for _ in range(n):
            x = x + 1
        return x
    np.testing.assert_allclose(g(tg.asarray(arr(3)), 2).numpy(), arr(3) + 2, rtol=1e-6)
    np.testing.assert_allclose(g(tg.asarray(arr(3)), n=3).numpy(), arr(3) + 3, rtol=1e-6)
    assert g.trace_count == 2
    h = tg.jit(lambda x, length: tnp.ones((length,)) * x, static_argnums=1)
    np.testing.assert_allclose(h(4.0, length=5).numpy(), np.full(5, 4.0))


def test_python_scalars_and_numpy_results_come_back_as_tensors():
    # JAX's jit returns arrays: a function returning its static argument, a counter's Python int or a numpy array
    # gives Tensors (Python numbers weakly typed), where a returned int was an error
    from tgfx.tensor import is_weak
    f = tg.jit(lambda x, n: (n, 2.0, True, x, np.arange(2, dtype=np.float32)), static_argnums=1)
    outs = f(tg.asarray(arr(2)), 10)
    assert all(isinstance(o, tg.Tensor) for o in outs)
    assert [o.dtype for o in outs] == [tg.dtypes.int32, tg.dtypes.float32, tg.dtypes.bool, tg.dtypes.float32,
                                      tg.dtypes.float32]
    assert [is_weak(o) for o in outs] == [True, True, False, False, False]
    assert [o.tolist() for o in outs[:3]] == [10, 2.0, True] and outs[4].tolist() == [0.0, 1.0]
    np.testing.assert_allclose(tg.grad(lambda x: tg.jit(lambda y: (y * 3, 1))(x)[0])(2.0).item(), 3.0)
