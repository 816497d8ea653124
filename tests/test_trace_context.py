"""The trace context belongs to the thread that entered it (issue #15): one thread inside a long trace (@function,
jit, grad, vmap, a tg.lax body) does not make another thread's calls behave as if they were traced. The other
thread's jit traces once and replays, its eager results are concrete and rebound to their buffers, stop_gradient
outside a differentiation is the identity, and concretization errors come only from its own traces; the first
thread's trace is still right when it finishes."""
import threading
from collections.abc import Callable

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.ir.ops import Ops
from tgfx.lowering.inline import EscapedTracerError
from tgfx.tensor import is_realized
from tgfx.trace_state import current

WAIT = 60.0  # seconds before a stuck handshake fails the test instead of hanging it


def _inside(kind: str, body: Callable[[tg.Tensor], tg.Tensor]) -> Callable[[np.ndarray], np.ndarray]:
    """A call that runs `body` on a traced value inside a trace of `kind`, and its result as numpy."""
    if kind == "function":
        return lambda x: tg.function(body)(tg.asarray(x)).numpy()
    if kind == "jit":
        return lambda x: tg.jit(body)(tg.asarray(x)).numpy()   # a new jitted function: it traces every time
    if kind == "grad":
        return lambda x: tg.grad(lambda v: body(v).sum())(tg.asarray(x)).numpy()
    if kind == "vmap":
        return lambda x: tg.vmap(body)(tg.asarray(x)[None]).numpy()[0]
    if kind == "lax":
        return lambda x: tg.lax.fori_loop(0, 1, lambda i, v: body(v), tg.asarray(x)).numpy()
    raise AssertionError(kind)


_EXPECTED = {"function": lambda x: x * 3, "jit": lambda x: x * 3, "grad": lambda x: np.full_like(x, 3),
             "vmap": lambda x: x * 3, "lax": lambda x: x * 3}


class _Tracer(threading.Thread):
    """Runs a trace of `kind` whose Python body waits at `barrier` twice: between the two, the trace is running and
    the main thread checks what it sees. Records what the trace saw inside and its result."""

    def __init__(self, kind: str, barrier: threading.Barrier, x: np.ndarray) -> None:
        super().__init__(daemon=True)
        self.kind, self.barrier, self.x = kind, barrier, x
        self.result: np.ndarray | None = None
        self.inside: tuple[bool, str] | None = None
        self.error: BaseException | None = None

    def body(self, v: tg.Tensor) -> tg.Tensor:
        self.barrier.wait(WAIT)
        self.barrier.wait(WAIT)
        # still inside after the other thread's work: reading the value is this trace's concretization error
        try:
            float(v.sum())
            self.inside = (current().active, "read")
        except tg.ConcretizationError as e:
            self.inside = (current().active, str(e))
        return v * 3

    def run(self) -> None:
        try:
            self.result = _inside(self.kind, self.body)(self.x)
        except BaseException as e:  # reported by the main thread
            self.error = e
            self.barrier.abort()


def _check_outside_any_trace(jitted: Callable, calls: int) -> None:
    """What a thread outside every trace sees: checked by the main thread while the other one is inside its trace."""
    assert not current().active
    x = tg.asarray(np.arange(4, dtype=np.float32))
    # jit traces once, then replays: it is not inlined into the other thread's trace
    for k in range(2):
        out = jitted(x + k)
        assert is_realized(out.uop)
        np.testing.assert_array_equal(out.numpy(), (np.arange(4) + k) * 2 + 1)
    assert jitted.trace_count == calls
    # eager results are concrete, and a computed Tensor is rebound to its buffer (not kept as a differentiated graph)
    y = tnp.exp(x) + 1
    assert float(y.sum()) == pytest.approx(float((np.exp(np.arange(4)) + 1).sum()), rel=1e-5)
    assert is_realized(y.uop)
    # stop_gradient outside a differentiation is the identity; grad works on its own
    assert tg.stop_gradient(x) is x
    np.testing.assert_allclose(tg.grad(lambda v: (v * v).sum())(x).numpy(), 2 * np.arange(4), rtol=1e-6)
    # a concretization error only from this thread's own trace, naming its argument
    with pytest.raises(tg.ConcretizationError, match="argument q"):
        tg.jit(lambda q: q * 2 if float(q.sum()) > 0 else q)(x)


@pytest.mark.parametrize("kind", ["function", "jit", "grad", "vmap", "lax"])
def test_a_trace_running_in_another_thread_is_not_seen(kind: str) -> None:
    jitted = tg.jit(lambda v: v * 2 + 1)
    barrier = threading.Barrier(2)
    x = np.array([1.0, 2.0], np.float32)
    tracer = _Tracer(kind, barrier, x)
    tracer.start()
    try:
        barrier.wait(WAIT)    # the other thread is inside its trace
        _check_outside_any_trace(jitted, calls=1)
        barrier.wait(WAIT)    # let it finish
    except BaseException:
        barrier.abort()       # release the tracer; its own error, if it failed first, is the one to see
        tracer.join(WAIT)
        if tracer.error is not None and not isinstance(tracer.error, threading.BrokenBarrierError):
            raise tracer.error from None
        raise
    tracer.join(WAIT)
    assert tracer.error is None, tracer.error
    np.testing.assert_allclose(tracer.result, _EXPECTED[kind](x), rtol=1e-6)
    active, seen = tracer.inside
    assert active
    if kind == "grad":   # values are concrete inside grad: reading one is allowed
        assert seen == "read"
    else:
        assert "not known while tracing" in seen and "argument" in seen


def test_threads_alternating_inside_and_outside_traces() -> None:
    """Two threads swap roles every iteration: one waits inside a trace while the other calls a warm jitted function,
    eager ops and grad; a jitted function shared by both traces once for all of them."""
    kinds = ["jit", "grad", "function", "vmap", "lax"]
    shared = tg.jit(lambda v: v * 2 + 1)
    shared(tg.asarray(np.arange(4, dtype=np.float32))).numpy()
    n = 20
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def worker(me: int) -> None:
        try:
            for i in range(n):
                kind = kinds[i % len(kinds)]
                if i % 2 == me:
                    def body(v: tg.Tensor) -> tg.Tensor:
                        barrier.wait(WAIT)
                        barrier.wait(WAIT)
                        return v * 3
                    x = np.full(2, i, np.float32)
                    np.testing.assert_allclose(_inside(kind, body)(x), _EXPECTED[kind](x), rtol=1e-6)
                else:
                    barrier.wait(WAIT)
                    try:
                        _check_outside_any_trace(shared, calls=1)
                    finally:
                        barrier.wait(WAIT)
        except BaseException as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(me,), daemon=True) for me in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 4)
    assert not any(t.is_alive() for t in threads)
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    assert not errors, real or errors


def test_an_escaped_tracer_is_a_typed_error_naming_its_function() -> None:
    """The lowering reports a PARAM that escaped its trace as a typed error carrying it; the front end names the
    function that made it."""
    leaked = []

    @tg.function
    def make(x: tg.Tensor) -> tg.Tensor:
        leaked.append(x * 2)
        return x

    make(tg.asarray(np.ones(5, np.float32)))
    with pytest.raises(EscapedTracerError, match=r"function .*make .*used after the function returned") as e:
        (leaked[0].sum() + 1).numpy()
    assert e.value.params and all(p.op is Ops.PARAM for p in e.value.params)


def test_no_trace_is_left_entered_after_an_error() -> None:
    def bad(v: tg.Tensor) -> tg.Tensor:
        raise ValueError("boom")
    for kind in ["function", "jit", "grad", "vmap", "lax"]:
        with pytest.raises(ValueError, match="boom"):
            _inside(kind, bad)(np.ones(2, np.float32))
        assert not current().active


# ---- a function closing over a value of an enclosing trace, or over one whose trace has ended ----
def test_a_function_closing_over_an_enclosing_functions_argument() -> None:
    """The inner function's body reads the outer one's argument from its closure: it becomes an extra argument of
    the inner call (it was the inner function's own PARAM of the same slot: an IndexError or the wrong value)."""
    x, w = np.arange(3, dtype=np.float32), np.full(3, 100, np.float32)

    def outer(a: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
        return tg.function(lambda y: y * a + 1)(w)

    for call in (tg.function(outer), tg.jit(outer)):
        np.testing.assert_array_equal(call(tg.asarray(x), tg.asarray(w)).numpy(), w * x + 1)
    g = tg.grad(lambda a: tg.function(outer)(a, tg.asarray(w)).sum())(tg.asarray(x))
    np.testing.assert_array_equal(g.numpy(), w)


def test_a_jitted_function_closing_over_a_loop_carry() -> None:
    """A jitted function called in a loop body is inlined; the carry it reads from its closure is the carry (it was
    read as the jitted function's own argument: [200, 200, 200])."""
    w = tg.asarray(np.full(3, 100, np.float32))
    out = tg.lax.fori_loop(0, 2, lambda i, c: tg.jit(lambda y: y + c)(w), tg.asarray(np.arange(3, dtype=np.float32)))
    np.testing.assert_array_equal(out.numpy(), [200, 201, 202])


def test_one_body_for_every_call_of_the_same_shapes() -> None:
    """Calls trace on stand-ins of their own, and their bodies are still one node (compiled work is shared)."""
    f = tg.function(lambda x, y: x * y + x)
    a = f(tg.asarray(np.ones(3, np.float32)), tg.asarray(np.ones(3, np.float32)))
    b = f(tg.asarray(np.zeros(3, np.float32)), tg.asarray(np.ones(3, np.float32)))
    assert a.uop.src[0].src[0] is b.uop.src[0].src[0]
    assert all(p.tag is None for p in a.uop.src[0].src[0].toposort() if p.op is Ops.PARAM)


@pytest.mark.parametrize("make", ["function", "vmap"])
def test_a_leaked_value_of_the_same_shape_read_by_a_later_function_is_an_escaped_tracer(make: str) -> None:
    """A traced value kept past its function and read by another function of the same argument shapes is an error
    naming the function that made it (it was silently read as the new function's argument of the same slot)."""
    leaked = []
    if make == "function":
        tg.function(lambda a: leaked.append(a * 2) or a)(tg.asarray(np.ones(3, np.float32)))
    else:
        tg.vmap(lambda a: leaked.append(a * 2) or a)(tg.asarray(np.ones((2, 3), np.float32)))
    with pytest.raises(EscapedTracerError, match=r"function .*<lambda>.* used after the function returned"):
        tg.jit(lambda y: y + leaked[0])(tg.asarray(np.full(3, 5, np.float32)))
    with pytest.raises(EscapedTracerError, match=r"used after the function returned"):
        tg.function(lambda y: y + leaked[0])(tg.asarray(np.full(3, 5, np.float32)))
