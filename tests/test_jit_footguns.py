"""The traps users of tracing JITs fall into, one test each, asserting what the right answer is."""
import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.lowering.inline import EscapedTracerError


def test_captured_tensor_is_baked_in_at_trace_time():
    # Like JAX: a Tensor read from a closure is a constant of the trace. Rebinding the name later does not change
    # the compiled function (Tensors are immutable, so the old value is still well defined).
    scale = tg.asarray(np.float32(2.0))
    f = tg.jit(lambda x: x * scale)
    assert f(tg.asarray(np.ones(3, np.float32))).tolist() == [2.0, 2.0, 2.0]
    scale = tg.asarray(np.float32(5.0))  # noqa: F841 - the trap: this does not reach the compiled function
    assert f(tg.asarray(np.ones(3, np.float32))).tolist() == [2.0, 2.0, 2.0]


def test_a_captured_tensor_keeps_its_value_after_another_call_donates_it():
    # the closure's Tensor is a constant of f's trace, read by every replay from its buffer: a later call donating
    # that Tensor wrote its result there, and f silently added [-100.] instead of [5.] (JAX raises there: the array
    # was deleted). The donating call takes over a copy instead
    w = tg.asarray(np.full(4, 5.0, np.float32))
    f = tg.jit(lambda x: x + w)
    zeros = tg.asarray(np.zeros(4, np.float32))
    assert f(zeros).tolist() == [5.0] * 4
    assert tg.jit(lambda v: v * 0 - 100, donate_argnums=0)(w).tolist() == [-100.0] * 4
    assert f(zeros).tolist() == [5.0] * 4


def test_captured_python_scalar_is_stale_after_change():
    # A Python number read from a closure is baked in at trace time too; pass it as an argument to vary it.
    k = 3.0
    f = tg.jit(lambda x: x * k)
    assert f(tg.asarray(np.ones(2, np.float32))).tolist() == [3.0, 3.0]
    k = 4.0
    assert f(tg.asarray(np.ones(2, np.float32))).tolist() == [3.0, 3.0]
    g = tg.jit(lambda x, k: x * k)
    assert g(tg.asarray(np.ones(2, np.float32)), 4.0).tolist() == [4.0, 4.0]


def test_outputs_are_not_overwritten_by_later_calls():
    f = tg.jit(lambda x: x + 1)
    y1 = f(tg.asarray(np.zeros(4, np.float32)))
    y2 = f(tg.asarray(np.full(4, 10, np.float32)))
    assert y1.tolist() == [1.0] * 4 and y2.tolist() == [11.0] * 4


def test_python_branch_on_a_static_argument_traces_each_branch():
    @tg.jit(static_argnums=1)
    def f(x, training):
        return x * 0.5 if training else x
    x = tg.asarray(np.ones(2, np.float32))
    assert f(x, True).tolist() == [0.5, 0.5] and f(x, False).tolist() == [1.0, 1.0]
    assert f.trace_count == 2


def test_python_branch_on_a_traced_value_is_an_error_not_a_silent_choice():
    def f(x):
        return x if x.sum() > 0 else -x
    with pytest.raises(tg.ConcretizationError):
        tg.jit(f)(tg.asarray(np.ones(2, np.float32)))
    # the traceable spelling
    g = tg.jit(lambda x: tnp.where(x.sum() > 0, x, -x))
    assert g(tg.asarray(-np.ones(2, np.float32))).tolist() == [1.0, 1.0]


def test_side_effects_run_only_while_tracing():
    log = []

    @tg.jit
    def f(x):
        log.append("traced")
        return x * 2
    for _ in range(3):
        f(tg.asarray(np.ones(2, np.float32)))
    assert log == ["traced"]


def test_a_traced_value_stored_outside_cannot_be_used_later():
    leaked = []

    @tg.jit
    def f(x):
        leaked.append(x * 3)
        return x
    f(tg.asarray(np.ones(2, np.float32)))
    with pytest.raises(EscapedTracerError):
        leaked[0].numpy()


def test_printing_a_traced_value_shows_its_type_not_an_error(capsys):
    # JAX's tutorials print(x) inside a jitted function to show what tracing sees: the value's type and shape (weak
    # types marked ~, as tg.typeof writes them), not a concretization error; an escaped one prints the same way
    leaked = []

    @tg.jit
    def f(x, n):
        print(x, repr(x * 2), f"{n}")
        leaked.append(x)
        return x * n
    assert f(tg.asarray(np.ones((2, 3), np.float32)), 2).tolist() == [[2.0] * 3] * 2
    assert capsys.readouterr().out == "Traced<float32[2,3]> Traced<float32[2,3]> Traced<~int32[]>\n"
    assert str(leaked[0]) == "Traced<float32[2,3]>"
    with pytest.raises(EscapedTracerError):   # (its value, asked for, is still an error)
        leaked[0].numpy()


def test_printing_a_value_shows_numpy_text_as_jax_does():
    # print(jax_array) is numpy's text of the value; repr adds the dtype and device
    x = tnp.asarray(np.array([[1.0, 2.5], [3.0, 4.0]], np.float32))
    assert str(x) == str(np.array([[1.0, 2.5], [3.0, 4.0]], np.float32))
    assert f"{tnp.float32(0.5)}" == "0.5" and "dtype=float32" in repr(x)


def test_a_method_on_a_plain_object_is_an_error_not_a_stale_trace():
    # JAX's Common Gotchas: @jit on a method whose self is a plain object. Keyed by the object's identity, the trace
    # was replayed after self.mul flipped, and calc(3) stayed 6 where 3 is right; JAX raises a TypeError naming the
    # argument, and so does tgfx. A class with __hash__/__eq__ over what it reads, marked static, retraces
    class Scaled:
        def __init__(self, x, mul):
            self.x, self.mul = x, mul

        @tg.jit
        def calc(self, y):
            return self.x * y if self.mul else y
    with pytest.raises(TypeError, match="argument self is a Scaled object"):
        Scaled(2, True).calc(3)

    class Keyed(Scaled):
        def __hash__(self):
            return hash((self.x, self.mul))

        def __eq__(self, other):
            return (self.x, self.mul) == (other.x, other.mul)
    calc = tg.jit(Scaled.calc.f, static_argnums=0)
    c = Keyed(2, True)
    assert calc(c, 3).item() == 6
    c.mul = False
    assert calc(c, 3).item() == 3


def test_changing_a_shape_retraces_instead_of_reusing_a_wrong_program():
    f = tg.jit(lambda x: x.sum())
    assert f(tg.asarray(np.ones(3, np.float32))).item() == 3.0
    assert f(tg.asarray(np.ones(5, np.float32))).item() == 5.0
    assert f.trace_count == 2


def test_integer_and_float_inputs_do_not_share_a_trace():
    f = tg.jit(lambda x: x / 2)
    assert f(tg.asarray(np.array([3], np.int32))).tolist() == [1.5]
    assert f(tg.asarray(np.array([3.0], np.float32))).tolist() == [1.5]
    assert f.trace_count == 2


def test_a_constant_initial_value_and_its_computed_successor_share_a_trace():
    """A loop carry started from `tnp.zeros(...)` (an optimizer state, a step count) is a lazy constant on the first
    call and a computed buffer on the next: both are on the default device, so the jitted step traces once."""
    @tg.jit
    def step(x: tg.Tensor, count: tg.Tensor) -> tuple[tg.Tensor, tg.Tensor]:
        return x + 1, count + 1

    from tgfx.devices import DEFAULT_DEVICE, canonical_device
    x, count = tnp.zeros(3), tnp.zeros((), tg.dtypes.int32)
    assert x.device == canonical_device(DEFAULT_DEVICE) == tg.asarray(np.zeros(3)).device
    for _ in range(3):
        x, count = step(x, count)
    assert step.trace_count == 1
    assert count.item() == 3 and x.tolist() == [3.0, 3.0, 3.0]


def test_grad_of_a_jitted_function_differentiates_through_it() -> None:
    # a jitted function called under grad is traced into the differentiated graph, not replayed as opaque kernels
    w, x = tg.asarray(np.full(3, 2.0, np.float32)), tg.asarray(np.arange(3, dtype=np.float32))
    g = tg.grad(tg.jit(lambda w, x: (x * w * w).sum()))(w, x)
    np.testing.assert_allclose(g.numpy(), 2 * np.arange(3) * 2.0)


def test_grad_reaches_a_value_a_jitted_function_captures() -> None:
    # the differentiated `w` is read from a closure inside jit/function: the gradient must still reach it (not 0)
    w, x = tg.asarray(np.full(3, 2.0, np.float32)), tg.asarray(np.arange(3, dtype=np.float32))
    g1 = tg.grad(lambda w: tg.jit(lambda x: (x * w).sum())(x))(w)
    g2 = tg.grad(lambda w: tg.function(lambda x: (x * w).sum(), allow_implicit=True)(x))(w)
    np.testing.assert_allclose(g1.numpy(), np.arange(3))
    np.testing.assert_allclose(g2.numpy(), np.arange(3))


# ---- aliasing: the same buffer passed as two arguments ----
def test_aliased_positional_arguments_then_distinct_ones_are_both_right():
    # one trace for both, as JAX's: every input slot is bound on its own (Adam's states built as `zeros, zeros`
    # were traced again on the second step, a second compile of a whole training step)
    f = tg.jit(lambda a, b: a + 2 * b)
    z = tg.asarray(np.zeros(4, np.float32))
    assert f(z, z).tolist() == [0.0] * 4
    one, ten = tg.asarray(np.ones(4, np.float32)), tg.asarray(np.full(4, 10, np.float32))
    assert f(one, ten).tolist() == [21.0] * 4      # not 30: b is not read from a's buffer
    assert f(ten, ten).tolist() == [30.0] * 4 and f.trace_count == 1
    g = tg.jit(lambda a, b: a - b)                  # distinct first, aliased after: every slot is bound on its own
    assert g(one, ten).tolist() == [-9.0] * 4 and g(one, one).tolist() == [0.0] * 4


def test_aliased_keyword_and_pytree_arguments():
    f = tg.jit(lambda p, *, scale: p["a"] - p["b"] * scale)
    x, y = tg.asarray(np.full(3, 5, np.float32)), tg.asarray(np.full(3, 2, np.float32))
    assert f({"a": x, "b": x}, scale=y).tolist() == [-5.0] * 3
    assert f({"a": x, "b": y}, scale=y).tolist() == [1.0] * 3
    assert f({"a": y, "b": x}, scale=y).tolist() == [-8.0] * 3
    h = tg.jit(lambda m, v: (m * 0.9 + 1.0, v * 0.5 + 1.0))   # Adam-style state built as `zeros, zeros`
    zeros = tnp.zeros(3)
    m, v = h(zeros, zeros)
    m, v = h(m, v)
    assert m.tolist() == pytest.approx([1.9] * 3) and v.tolist() == pytest.approx([1.5] * 3)


def test_a_donated_argument_also_passed_as_another_is_not_written_while_read():
    # the donated x's buffer may take the result a + b, written before b's last read (b[::-1]); passed as both, the
    # program writes into a copy
    f = tg.jit(lambda a, b: (a + b[::-1], b * 2), donate_argnums=0)
    x = tg.asarray(np.arange(6, dtype=np.float32))
    s, d = f(x, x)
    np.testing.assert_array_equal(s.numpy(), np.full(6, 5, np.float32))
    np.testing.assert_array_equal(d.numpy(), 2 * np.arange(6, dtype=np.float32))
    y, w = tg.asarray(np.ones(6, np.float32)), tg.asarray(np.arange(6, dtype=np.float32))
    s, d = f(y, w)
    np.testing.assert_array_equal(s.numpy(), 1 + np.arange(6, dtype=np.float32)[::-1])
    assert f.trace_count == 1


def test_two_views_of_one_buffer_alias_too():
    f = tg.jit(lambda a, b: a * 10 + b)
    x = tg.asarray(np.arange(4, dtype=np.float32))
    assert f(x.reshape(2, 2), x.reshape(2, 2)).tolist() == [[0.0, 11.0], [22.0, 33.0]]
    assert f(x.reshape(2, 2), (x + 1).reshape(2, 2)).tolist() == [[1.0, 12.0], [23.0, 34.0]]


def test_equal_python_scalars_share_a_buffer_but_not_a_trace():
    s = tg.jit(lambda a, b: a * 10 + b)
    assert s(0.5, 0.5).item() == 5.5 and s(0.5, 0.25).item() == 5.25 and s(2.0, 2.0).item() == 22.0
    assert s.trace_count == 1  # equal values are one interned buffer; as in JAX, that is not a new signature
    d = tg.jit(lambda x, start, stop: x[start] - x[stop])
    x = tg.asarray(np.arange(5, dtype=np.float32) ** 2)
    assert d(x, 0, 0).item() == 0.0 and d(x, 3, 2).item() == 5.0 and d(x, 4, 4).item() == 0.0
    assert d.trace_count == 1
