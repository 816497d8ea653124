"""Host callbacks (`tg.debug.print`, `tg.debug.callback`, `tg.pure_callback`, `tg.io_callback`) through the public API:
eagerly, under jit (every replay, no retrace), in lax loops and branches (one call per step, in order, run by the
command processor), under vmap and grad, and their errors. Expected output is what JAX 0.10 prints for the same
programs."""
import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.devices import DEFAULT_DEVICE, get_device
from tgfx.devices.hcq import HCQExecError


def lines(capsys: pytest.CaptureFixture) -> list[str]:
    return capsys.readouterr().out.splitlines()


# ---- debug.print ----
def test_eager_print_formats_like_str_format(capsys):
    x = tnp.arange(3.0)
    tg.debug.print("x={x} y={}", x * 2, x=x)
    tg.debug.print("no args")
    tg.debug.print("{x:.2f} and {}", 1.5, x=np.float32(2.0))
    assert lines(capsys) == ["x=[0. 1. 2.] y=[0. 2. 4.]", "no args", "2.00 and 1.5"]


def test_jit_prints_at_every_call_with_that_calls_values(capsys):
    @tg.jit
    def f(x):
        tg.debug.print("x={x}", x=x)
        return x * 2
    for i in range(3):
        f(tnp.arange(2.0) + i).block_until_ready()
    assert lines(capsys) == ["x=[0. 1.]", "x=[1. 2.]", "x=[2. 3.]"]
    assert f.trace_count == 1


def test_equal_prints_print_twice_and_unused_prints_still_print_in_order(capsys):
    @tg.jit
    def f(x):
        y = x + 1
        tg.debug.print("y={}", y)
        tg.debug.print("y={}", y)
        tg.debug.print("first {}", x)   # reads only x: could run before the others, but program order wins
        return x
    f(tnp.ones(()))
    f(tnp.zeros(())).block_until_ready()
    assert lines(capsys) == ["y=2.0", "y=2.0", "first 1.0", "y=1.0", "y=1.0", "first 0.0"]


def test_jit_that_only_prints(capsys):
    g = tg.jit(lambda: tg.debug.print("const {}", 3))
    assert g() is None
    g()
    get_device(DEFAULT_DEVICE).synchronize()
    assert lines(capsys) == ["const 3", "const 3"]


def test_nested_jit_prints_in_program_order(capsys):
    inner = tg.jit(lambda x: (tg.debug.print("inner {}", x), x * 2)[1])

    @tg.jit
    def outer(x):
        tg.debug.print("before {}", x)
        y = inner(x + 1)
        tg.debug.print("after {}", x)
        return y
    outer(1.0).block_until_ready()
    assert lines(capsys) == ["before 1.0", "inner 2.0", "after 1.0"]


def test_fori_loop_of_100_prints_each_step_in_order_while_main_thread_blocks(capsys):
    f = tg.jit(lambda x: tg.lax.fori_loop(0, 100, lambda i, c: (tg.debug.print("{}", i), c + 1.0)[1], x))
    y = f(tnp.zeros(()))
    y.block_until_ready()
    assert float(y) == 100.0
    assert lines(capsys) == [str(i) for i in range(100)]
    f(tnp.zeros(())).block_until_ready()   # again: the replay runs them again, no retrace
    assert lines(capsys) == [str(i) for i in range(100)]
    assert f.trace_count == 1


def test_scan_prints_each_steps_values(capsys):
    def step(c, x):
        tg.debug.print("c={} x={}", c, x)
        return c + x, c * x
    c, ys = tg.jit(lambda xs: tg.lax.scan(step, 0.0, xs))(tnp.arange(4.0))
    np.testing.assert_allclose(ys.numpy(), [0.0, 0.0, 2.0, 9.0])
    assert lines(capsys) == ["c=0.0 x=0.0", "c=0.0 x=1.0", "c=1.0 x=2.0", "c=3.0 x=3.0"]
    tg.lax.scan(step, 0.0, tnp.arange(2.0))   # eager: runs at once
    assert lines(capsys) == ["c=0.0 x=0.0", "c=0.0 x=1.0"]


def test_while_loop_and_cond_print_only_what_runs(capsys):
    def body(c):
        tg.debug.print("w {}", c)
        return c + 1
    assert int(tg.jit(lambda x: tg.lax.while_loop(lambda c: c < 3, body, x))(0)) == 3
    assert lines(capsys) == ["w 0", "w 1", "w 2"]
    f = tg.jit(lambda p, x: tg.lax.cond(p, lambda x: (tg.debug.print("T {}", x), x)[1],
                                        lambda x: (tg.debug.print("F {}", x), x * 2)[1], x))
    assert float(f(False, 3.0)) == 6.0
    assert float(f(True, 3.0)) == 3.0
    assert lines(capsys) == ["F 3.0", "T 3.0"]


def test_print_in_while_cond_is_a_clear_error():
    with pytest.raises(NotImplementedError, match="cond_fun"):
        tg.lax.while_loop(lambda c: (tg.debug.print("{}", c), c < 3)[1], lambda c: c + 1, 0)


def test_vmap_prints_once_per_example_as_jax(capsys):
    def f(x):
        tg.debug.print("x={x}", x=x)
        return x * 2
    np.testing.assert_allclose(tg.vmap(f)(tnp.arange(3.0)).numpy(), [0, 2, 4])
    assert lines(capsys) == ["x=0.0", "x=1.0", "x=2.0"]
    tg.jit(tg.vmap(f))(tnp.arange(2.0)).block_until_ready()
    assert lines(capsys) == ["x=0.0", "x=1.0"]


def test_grad_prints_primal_values_and_keeps_gradients(capsys):
    def k(x):
        tg.debug.print("g {}", x)
        return (x ** 2).sum()
    np.testing.assert_allclose(tg.grad(k)(tnp.ones(2)).numpy(), [2.0, 2.0])
    np.testing.assert_allclose(tg.jit(tg.grad(k))(tnp.ones(2)).numpy(), [2.0, 2.0])
    v, g = tg.value_and_grad(k)(tnp.ones(2))
    assert float(v) == 2.0
    assert lines(capsys) == ["g [1. 1.]"] * 3


# ---- debug.callback ----
def test_debug_callback_gets_numpy_copies(capsys):
    seen = []

    @tg.jit
    def f(x):
        tg.debug.callback(lambda v, scale: seen.append(v * scale), x, scale=2)
        return x + 1
    for i in range(3):
        f(tnp.full((2,), float(i))).block_until_ready()
    assert all(isinstance(s, np.ndarray) for s in seen)
    np.testing.assert_allclose(np.stack(seen), [[0, 0], [2, 2], [4, 4]])


def test_callback_exception_surfaces_naming_the_callback():
    def boom(v):
        raise ZeroDivisionError("division by zero")
    with pytest.raises(HCQExecError, match="debug.callback.*boom.*ZeroDivisionError") as info:
        tg.debug.callback(boom, tnp.ones(()))     # eager: at the call
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    f = tg.jit(lambda x: (tg.debug.callback(boom, x), x + 1)[1])
    with pytest.raises(HCQExecError, match="boom"):
        f(1.0).block_until_ready()                # jitted: at the next synchronisation
    assert float(tg.jit(lambda x: x * 2)(3.0)) == 6.0   # and the device runs on


# ---- pure_callback ----
def test_pure_callback_eager_jit_and_pytree_results():
    x = tnp.arange(3.0)
    y = tg.pure_callback(lambda v: np.sin(v), tg.ShapeDtypeStruct(x.shape, x.dtype), x)
    np.testing.assert_allclose(y.numpy(), np.sin(np.arange(3.0)), rtol=1e-6)
    spec = {"s": tg.ShapeDtypeStruct((3,), tnp.float32), "n": tg.ShapeDtypeStruct((), tnp.int32)}
    f = tg.jit(lambda x: tg.pure_callback(lambda v: {"s": np.cos(v), "n": np.int32(v.size)}, spec, x))
    out = f(x)
    np.testing.assert_allclose(out["s"].numpy(), np.cos(np.arange(3.0)), rtol=1e-6)
    assert int(out["n"]) == 3 and out["n"].dtype == tnp.int32
    out = f(x + 1)
    np.testing.assert_allclose(out["s"].numpy(), np.cos(np.arange(3.0) + 1), rtol=1e-6)
    assert f.trace_count == 1


def test_pure_callback_result_mismatch_is_a_clear_error():
    f = tg.jit(lambda x: tg.pure_callback(lambda v: np.ones(3, np.float32), tg.ShapeDtypeStruct((), tnp.float32), x))
    with pytest.raises(HCQExecError, match=r"incorrect output shape.*expected \(\), actual \(3,\)"):
        f(1.0).block_until_ready()
    g = tg.jit(lambda x: tg.pure_callback(lambda v: v.astype(np.int16), tg.ShapeDtypeStruct((), tnp.float32), x))
    with pytest.raises(HCQExecError, match="incorrect output dtype.*expected float32, actual int16"):
        g(1.0).block_until_ready()
    # a float64 result for a float32 declaration is what JAX accepts without x64 (its canonical type)
    h = tg.pure_callback(lambda v: np.float64(2.5), tg.ShapeDtypeStruct((), tnp.float32), tnp.ones(()))
    assert float(h) == 2.5


def test_pure_callback_in_a_loop_runs_each_step():
    calls = []

    def cb(v):
        calls.append(float(v))
        return (v * 2).astype(np.float32)
    f = tg.jit(lambda x: tg.lax.fori_loop(
        0, 4, lambda i, c: tg.pure_callback(cb, tg.ShapeDtypeStruct((), tnp.float32), c) + 1.0, x))
    assert float(f(0.0)) == 15.0
    assert calls == [0.0, 1.0, 3.0, 7.0]


def test_pure_callback_vmap_methods_as_jax():
    calls = []

    def seq(x):
        def cb(v):
            calls.append(v.shape)
            return np.sin(v)
        return tg.pure_callback(cb, tg.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="sequential")
    np.testing.assert_allclose(tg.vmap(seq)(tnp.arange(3.0)).numpy(), np.sin(np.arange(3.0)), rtol=1e-6)
    assert calls == [()] * 3
    calls.clear()
    tg.jit(tg.vmap(tg.vmap(seq)))(tnp.ones((2, 3))).block_until_ready()
    assert calls == [()] * 6
    for method, shapes in (("expand_dims", [((3,), (1,))]), ("broadcast_all", [((3,), (3,))])):
        calls.clear()

        def two(x, y, method=method):
            def cb(v, w):
                calls.append((v.shape, w.shape))
                return np.sin(v) + w
            return tg.pure_callback(cb, tg.ShapeDtypeStruct(x.shape, x.dtype), x, y, vmap_method=method)
        out = tg.vmap(two, in_axes=(0, None))(tnp.arange(3.0), tnp.ones(()))
        np.testing.assert_allclose(out.numpy(), np.sin(np.arange(3.0)) + 1, rtol=1e-6)
        assert calls == shapes
    with pytest.raises(NotImplementedError, match="vmap_method=None"):
        tg.vmap(lambda x: tg.pure_callback(np.sin, tg.ShapeDtypeStruct((), tnp.float32), x))(tnp.arange(3.0))


def test_pure_callback_has_no_derivative_unless_wrapped():
    f = lambda x: tg.pure_callback(np.sin, tg.ShapeDtypeStruct((), tnp.float32), x)  # noqa: E731
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP"):
        tg.grad(f)(1.0)

    @tg.custom_jvp
    def s(x):
        return f(x)
    s.defjvp(lambda p, t: (s(p[0]), tnp.cos(p[0]) * t[0]))
    np.testing.assert_allclose(float(tg.grad(s)(1.0)), np.cos(1.0), rtol=1e-6)
    np.testing.assert_allclose(float(tg.jit(tg.grad(s))(1.0)), np.cos(1.0), rtol=1e-6)


def test_unused_pure_callback_may_be_dropped_but_io_callback_runs(capsys):
    calls = []
    spec = tg.ShapeDtypeStruct((), tnp.float32)

    @tg.jit
    def f(x):
        tg.pure_callback(lambda v: calls.append("pure") or v, spec, x)   # pure and unused: dropped, as JAX may
        tg.debug.print("a")
        y = tg.io_callback(lambda v: calls.append("io") or (v + 1), spec, x)
        tg.debug.print("b {}", y)
        return x
    f(1.0).block_until_ready()
    assert calls == ["io"]
    assert lines(capsys) == ["a", "b 2.0"]


CALLS_TGFX = """
import faulthandler
import numpy as np
import tgfx as tg
import tgfx.numpy as tnp
from tgfx.devices.hcq import HCQCallbackError, HCQExecError

faulthandler.dump_traceback_later(60, exit=True)
w = tnp.arange(4.0) * 2
w.numpy()

def computes(x):    # what a JAX user may write: the framework's own ops inside the callback
    return (tnp.asarray(x) * 2 + 1).numpy()

def reads(x):
    return x + w.numpy()

spec = tg.ShapeDtypeStruct((4,), tg.dtypes.float32)
for name, fn in [("computes", computes), ("reads", reads)]:
    for how, f in [("jit", tg.jit(lambda v: tg.pure_callback(fn, spec, v * 3) + 1)),
                   ("eager", lambda v: tg.pure_callback(fn, spec, v * 3) + 1)]:
        try:
            got = f(tg.asarray(np.arange(4, dtype=np.float32))).numpy().tolist()
            # a read that need not wait (the value was written before the callback's submission) is fine
            print(name, how, "ok" if name == "reads" and got == [1.0, 6.0, 11.0, 16.0] else got)
        except HCQExecError as e:
            print(name, how, "ok" if isinstance(e.__cause__, HCQCallbackError) else repr(e))
print((w + 1).numpy().tolist())
"""


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "ring"])
def test_a_callback_using_tgfx_raises_instead_of_waiting_for_itself(inline):
    # the callback runs between the device's kernels (on its processor, or on the caller inline while it holds the
    # device's submit lock): a tgfx computation or read inside it waited for a device that waited for the callback.
    # It hung for good; it raises a clear error, and the device carries on
    import os
    import subprocess
    import sys
    # (the CPU's processor and its inline runs, named: a default device of the parent's, an emulated one, is not the
    # child's)
    env = {**os.environ, "TGFX_DEVICE": "CPU", "TGFX_INLINE_BYTES": "-1" if inline else "0"}
    run = subprocess.run([sys.executable, "-c", CALLS_TGFX], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines() == [f"{n} {h} ok" for n in ("computes", "reads") for h in ("jit", "eager")] + \
        ["[1.0, 3.0, 5.0, 7.0]"], run.stdout + run.stderr[-2000:]


def test_the_callback_tutorials_spelling_of_result_types_and_io_callback() -> None:
    # JAX's external-callbacks tutorial: pure_callback(f, jax.ShapeDtypeStruct.like(x), x) and
    # `from jax.experimental import io_callback` (an AttributeError and an ImportError before)
    from tgfx.experimental import io_callback

    def f(x):
        return tg.pure_callback(np.sin, tg.ShapeDtypeStruct.like(x), x)
    x = tnp.arange(5.0)
    np.testing.assert_allclose(tg.jit(f)(x).numpy(), np.sin(np.arange(5.0, dtype=np.float32)), rtol=1e-6)
    like = tg.ShapeDtypeStruct.like
    assert (like(x).shape, like(x).dtype) == ((5,), tg.dtypes.float32)
    assert (like(np.zeros((2, 3), np.int32)).shape, like(np.zeros((2, 3), np.int32)).dtype) == ((2, 3), tg.dtypes.int32)
    assert (like(1.0).shape, like(1.0).dtype) == ((), tg.dtypes.float32)
    assert io_callback is tg.io_callback
