"""@function through the public API: tracing, keys, caching, inlining, precompile, custom kernels, errors."""
import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.function import FunctionError
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.kernel import custom_kernel, krange, load, reduce, sink, store
from tgfx.lowering.inline import EscapedTracerError


def arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@tg.function
def affine(x, w, b):
    return x @ w + b


def test_traces_into_function_of_params():
    x, w, b = tg.asarray(arr(2, 3)), tg.asarray(arr(3, 4)), tg.asarray(arr(4))
    y = affine(x, w, b)
    g = y.uop
    assert g.op is Ops.GETTUPLE and g.arg == 0
    fn = g.src[0]
    assert fn.op is Ops.FUNCTION and fn.arg[0] == "affine"
    assert fn.src[0].op is Ops.TUPLE and fn.src[1:] == (x.uop, w.uop, b.uop)
    assert {u.op for u in fn.src[0].toposort()} & {Ops.BUFFER} == set()
    assert sorted(u.arg[0] for u in fn.src[0].toposort() if u.op is Ops.PARAM) == [0, 1, 2]
    np.testing.assert_allclose(y.numpy(), arr(2, 3) @ arr(3, 4) + arr(4), rtol=1e-5)


def test_equal_signatures_give_equal_body_keys_and_reuse_schedules():
    x1, x2 = tg.asarray(arr(8, 8, seed=1)), tg.asarray(arr(8, 8, seed=2))
    w, b = tg.asarray(arr(8, 8)), tg.asarray(arr(8))
    y1 = affine(x1, w, b)
    y2 = affine(x2, w, b)
    assert y1.uop.src[0].src[0].key == y2.uop.src[0].src[0].key
    y1.numpy()
    tg.counters.reset()
    np.testing.assert_allclose(y2.numpy(), arr(8, 8, seed=2) @ arr(8, 8) + arr(8), rtol=1e-5, atol=1e-6)
    assert tg.counters.schedule_count == 0 and tg.counters.compile_count == 0 and tg.counters.kernel_count == 1


def test_dedupes_inputs_by_identity():
    @tg.function
    def f(a, b):
        return a * b
    x = tg.asarray(arr(3))
    y = f(x, x)
    assert len(y.uop.src[0].src) == 2  # body + one argument
    np.testing.assert_allclose(y.numpy(), arr(3) ** 2, rtol=1e-6)


def test_inlined_function_fuses_with_its_caller():
    @tg.function
    def gelu(x):
        return 0.5 * x * (1 + tnp.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
    x = tg.asarray(arr(16))
    tg.counters.reset()
    y = (gelu(x) * 2).numpy()
    assert tg.counters.kernel_count == 1
    ref = 0.5 * arr(16) * (1 + np.tanh(0.7978845608 * (arr(16) + 0.044715 * arr(16) ** 3))) * 2
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_nested_functions_and_several_results_used_partly():
    @tg.function
    def inner(x):
        return x + 1, x * 2

    @tg.function
    def outer(x):
        a, b = inner(x)
        return {"sum": a + b, "a": a}

    x = tg.asarray(arr(5))
    out = outer(x)
    assert set(out) == {"a", "sum"}
    tg.counters.reset()
    np.testing.assert_allclose(out["sum"].numpy(), arr(5) + 1 + arr(5) * 2, rtol=1e-6)
    assert tg.counters.kernel_count == 1  # only the used result is computed


class Pair(NamedTuple):
    a: tg.Tensor
    b: tg.Tensor


@dataclasses.dataclass
class Linear:
    w: tg.Tensor
    b: tg.Tensor


tg.tree.register_dataclass(Linear)


def test_pytree_arguments_and_results():
    @tg.function
    def f(p: Pair, layer: Linear, scale: float):
        return Pair(p.a @ layer.w + layer.b, p.b * scale)
    p = Pair(tg.asarray(arr(2, 3)), tg.asarray(arr(4)))
    out = f(p, Linear(tg.asarray(arr(3, 3)), tg.asarray(arr(3))), 3.0)
    assert isinstance(out, Pair)
    np.testing.assert_allclose(out.a.numpy(), arr(2, 3) @ arr(3, 3) + arr(3), rtol=1e-5)
    np.testing.assert_allclose(out.b.numpy(), arr(4) * 3, rtol=1e-6)


def test_methods_and_callable_instances():
    class Model:
        def __init__(self, k):
            self.k = k

        @tg.function
        def apply(self, x):
            return x * self.k

    class Scaler:
        def __call__(self, x):
            return x / 2

    x = tg.asarray(arr(3))
    np.testing.assert_allclose(Model(3.0).apply(x).numpy(), arr(3) * 3, rtol=1e-6)
    np.testing.assert_allclose(tg.function(Scaler())(x).numpy(), arr(3) / 2, rtol=1e-6)


def test_implicit_capture_is_an_error_naming_each_buffer():
    w = tg.asarray(arr(3, 3))

    @tg.function
    def f(x):
        return x @ w

    with pytest.raises(FunctionError, match=r"(?s)function test_implicit_capture.*f reads 1 concrete.*"
                                            r"w: float32\[3, 3\] "
                                            rf"on {w.device}.*allow_implicit=True"):
        f(tg.asarray(arr(2, 3)))


def test_allow_implicit_turns_captures_into_arguments():
    w = tg.asarray(arr(3, 3))

    @tg.function(allow_implicit=True)
    def f(x):
        return x @ w

    y = f(tg.asarray(arr(2, 3)))
    assert len(y.uop.src[0].src) == 3  # body, x, w
    np.testing.assert_allclose(y.numpy(), arr(2, 3) @ arr(3, 3), rtol=1e-5)


def test_precompile_compiles_once_and_replays():
    @tg.function(precompile=True)
    def mlp(x, w):
        return tnp.maximum(x @ w, 0).sum(axis=1)

    w = tg.asarray(arr(8, 8))
    y1 = mlp(tg.asarray(arr(4, 8, seed=1)), w)
    assert y1.uop.src[0].op is Ops.CALL
    y1.numpy()
    tg.counters.reset()
    x2 = arr(4, 8, seed=2)
    # (a caller's kernel no other test compiles first in this process: `y * 2` alone may be in the kernel cache)
    y2 = tnp.flip(mlp(tg.asarray(x2), w)) * 2 - 0.375
    np.testing.assert_allclose(y2.numpy(), np.maximum(x2 @ arr(8, 8), 0).sum(1)[::-1] * 2 - 0.375, rtol=1e-5)
    assert tg.counters.compile_count == 1  # only the caller's kernel; the body compiled nothing
    assert tg.counters.kernel_count == 2  # the opaque call does not fuse with the caller
    tg.counters.reset()
    mlp(tg.asarray(arr(4, 8, seed=3)), w).numpy()
    assert tg.counters.compile_count == 0 and tg.counters.schedule_count == 0


def test_returning_a_non_tensor_names_the_path():
    @tg.function
    def f(x):
        return {"y": x, "n": [x, 3]}
    with pytest.raises(FunctionError, match=r"function .*f returned a int at \['n'\]\[1\]"):
        f(tg.asarray(arr(2)))


def test_escaped_tracer_is_an_error():
    leaked = []

    @tg.function
    def f(x):
        leaked.append(x + 1)
        return x * 2
    f(tg.asarray(arr(2))).numpy()
    with pytest.raises(EscapedTracerError, match="function .*f .*used after the function returned"):
        leaked[0].numpy()


def _row_softmax(out, x, rows, cols):
    r, c1, c2, c3 = krange(rows, 0), krange(cols, 1, "reduce"), krange(cols, 2, "reduce"), krange(cols, 3)
    m = reduce(load(x, r * cols + c1), c1, "max")

    def e(c):
        return (load(x, r * cols + c) - m).alu(Ops.EXP)
    return sink(store(out, r * cols + c3, e(c3).alu(Ops.FDIV, reduce(e(c2), c2, "add"))))


def test_custom_kernel_row_softmax_is_one_kernel():
    x = arr(6, 10)
    tg.counters.reset()
    y = custom_kernel(lambda o, i: _row_softmax(o, i, 6, 10), tg.asarray(x), outputs=[((6, 10), tg.dtypes.float32)],
                      name="row_softmax")
    assert y.uop.src[0].op is Ops.CALL and y.uop.src[0].arg[0] == "row_softmax"
    ref = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y.numpy(), ref / ref.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert tg.counters.kernel_count == 1


def test_custom_kernel_stores_grad_fxn():
    def back(grads, call):
        return grads
    y = custom_kernel(lambda o, i: sink(store(o, krange(4, 0), load(i, krange(4, 0)))), tg.asarray(arr(4)),
                      outputs=[((4,), "float32")], grad_fxn=back)
    assert y.uop.src[0].arg[1].grad_fxn is back
    np.testing.assert_allclose(y.numpy(), arr(4))


def test_function_grad_fxn_is_stored_on_the_node():
    def back(grads, call):
        return grads
    f = tg.function(lambda x: x * 2, grad_fxn=back)
    assert f(tg.asarray(arr(2))).uop.src[0].arg[1].grad_fxn is back


# ---- gradients through functions (SPEC §4) ----
def _backward_of(g: tg.Tensor) -> UOp:
    return next(u for u in g.uop.toposort() if u.op in (Ops.FUNCTION, Ops.CALL) and u.arg[0].endswith("_backward"))


@pytest.mark.x64
def test_grad_through_a_function_builds_a_named_backward_function():
    @tg.function
    def layer(x, w, unused):
        return tnp.tanh(x @ w)
    x, w = np.random.default_rng(0).standard_normal((3, 4)), np.random.default_rng(1).standard_normal((4, 2))
    g = tg.grad(lambda w: (layer(tg.asarray(x), w, tg.asarray(np.ones(5))) ** 2).sum())(tg.asarray(w))
    bw = _backward_of(g)
    assert bw.op is Ops.FUNCTION and bw.arg[0].endswith("layer_backward")
    assert len(bw.src) - 1 == 3  # x, w and the output gradient: `unused` is compacted away
    h = np.tanh(x @ w)
    np.testing.assert_allclose(g.numpy(), x.T @ (2 * h * (1 - h * h)), rtol=1e-10)


@pytest.mark.x64
def test_grad_of_a_precompiled_function_reuses_its_outputs():
    pl = tg.function(lambda x, w: tnp.exp(x @ w), precompile=True, precompile_backward=True)
    x, w = np.random.default_rng(0).standard_normal((3, 4)), np.random.default_rng(1).standard_normal((4, 2))
    g = tg.grad(lambda w: pl(tg.asarray(x), w).sum())(tg.asarray(w))
    bw = _backward_of(g)
    assert bw.op is Ops.CALL  # precompile_backward
    assert any(a.op is Ops.GETTUPLE and a.src[0].op is Ops.CALL for a in bw.src[1:])  # exp(x @ w) is passed in
    np.testing.assert_allclose(g.numpy(), x.T @ np.exp(x @ w), rtol=1e-10)


def test_grad_fxn_replaces_the_backward():
    def straight_through(g, call):
        return (g,)  # d round(x)/dx taken as 1; one result, so its gradient comes as a Tensor (jax.custom_vjp's way)
    rnd = tg.function(lambda x: tnp.round(x), grad_fxn=straight_through)
    g = tg.grad(lambda x: (rnd(x) * 3).sum())(tg.asarray(np.array([0.2, 1.7])))
    np.testing.assert_allclose(g.numpy(), [3.0, 3.0])


def test_grad_fxn_returning_the_wrong_structure_is_an_error_naming_the_function():
    bad = tg.function(lambda x, y: x * y, grad_fxn=lambda g, call: (g,))
    with pytest.raises(TypeError, match=r"grad_fxn of .*<lambda> must return a tuple with one gradient .* 2 in all"):
        tg.grad(lambda x: bad(x, x * 2).sum())(tg.asarray(np.ones(2)))


def test_custom_kernel_gradients_need_a_grad_fxn():
    def copy_kernel(o, i):
        r = krange(4, 0)
        return sink(store(o, r, load(i, r) * load(i, r)))

    def square(x, with_grad):
        back = (lambda g, call: (g * 2 * call.inputs[0],)) if with_grad else None
        return custom_kernel(copy_kernel, x, outputs=[((4,), "float32")], name="square", grad_fxn=back)
    x = tg.asarray(np.arange(4, dtype=np.float32))
    np.testing.assert_allclose(tg.grad(lambda x: square(x, True).sum())(x).numpy(), [0, 2, 4, 6])
    with pytest.raises(TypeError, match="cannot differentiate custom kernel 'square'.*grad_fxn"):
        tg.grad(lambda x: square(x, False).sum())(x)


def test_grad_through_nested_functions_whose_params_collide_with_the_callers():
    # f's body PARAM(0) of shape () and of shape (2,) are the very UOps of the outer body's PARAMs of that slot:
    # the outer backward must not read the inner bodies' PARAMs as its own (the gradient of `a` came out zero)
    a = tg.asarray(np.float32([0.5, 1.0]))
    c = tg.Tensor.full((), 0.3, tg.dtypes.float32)
    f = tg.function(lambda x: tnp.broadcast_to(x, (2,)) * 3.0)
    outer = tg.function(lambda a: f(a) + f(c), allow_implicit=True)
    np.testing.assert_array_equal(tg.grad(lambda a: outer(a).sum())(a).numpy(), [3.0, 3.0])
    inner = tg.jit(lambda x: tnp.broadcast_to(x, (2,)) * x)
    g = tg.grad(lambda a: tg.jit(lambda a: inner(a) + inner(c))(a).sum())(a)
    np.testing.assert_allclose(g.numpy(), 2 * a.numpy())


def test_host_data_made_inside_a_function_is_its_constant_not_a_capture():
    @tg.function
    def f(x):
        return x + tnp.asarray(0, dtype=tnp.int32) + tnp.asarray(2.5) + tnp.asarray(np.arange(3.0, dtype=np.float32))

    @tg.function
    def outer(x):
        return f(x) * tnp.asarray(2.0)      # nested: the inner function's constant is the outer's too

    np.testing.assert_allclose(outer(tnp.ones(3)).numpy(), (1 + 2.5 + np.arange(3.0)) * 2)
    np.testing.assert_allclose(tg.grad(lambda x: f(x).sum())(tnp.ones(3)).numpy(), np.ones(3))
    y = tg.asarray(np.ones(3, np.float32))

    @tg.function
    def g(x):
        return x + y + tnp.asarray(1.0)
    with pytest.raises(FunctionError, match=r"reads 1 concrete Tensor\(s\).*\n  - y: float32\[3\]"):
        g(tnp.ones(3))


def test_a_cached_function_traces_once_per_signature_outside_traces():
    """`function(cache=True)` reuses the body traced for an earlier eager call with the same signature (as jit does;
    the library's linear algebra uses it), traces again for another shape, dtype or static argument, and inside a
    trace (grad, jit) always runs the function."""
    calls = []

    def body(x, scale):
        calls.append(scale)
        return x * scale + tnp.asarray(1.0)     # a constant the body makes: reused with the body

    f = tg.function(body, cache=True)
    a = tg.asarray(np.arange(3, dtype=np.float32))
    np.testing.assert_allclose(f(a, 2.0).numpy(), np.arange(3) * 2 + 1)
    np.testing.assert_allclose(f(a + 1, 2.0).numpy(), (np.arange(3) + 1) * 2 + 1)    # same signature: no trace
    assert len(calls) == 1
    f(a, 3.0), f(a[:2], 2.0), f(a.astype(tnp.int32), 2.0), f(a, 2)                  # each a new signature
    assert len(calls) == 5
    tg.grad(lambda x: f(x, 2.0).sum())(a)
    tg.jit(lambda x: f(x, 2.0))(a)
    assert len(calls) == 7


def test_an_eager_graph_calling_functions_is_inlined_once_per_structure(monkeypatch):
    """An eager graph that calls a function (a cached one: the library's linear algebra) finds its schedule by its
    abstraction, the body named by identity, and is inlined only when that is new: new buffers, new values of lifted
    constants, an argument the body does not read and one Tensor passed twice all reuse it, with their own values."""
    import tgfx.lowering as lowering
    inlined = []
    real = lowering._inline
    monkeypatch.setattr(lowering, "_inline", lambda sink: inlined.append(sink) or real(sink))

    def body(x, y, unused):
        return tnp.tanh(x) @ y
    f = tg.function(body, cache=True)
    rng = np.random.default_rng(0)
    for k in range(4):
        x, y, u = (rng.standard_normal((3, 3)).astype(np.float32) for _ in range(3))
        out = f(tg.asarray(x), tg.asarray(y), tg.asarray(u)) * (k + 2.5)   # a lifted constant, another each call
        np.testing.assert_allclose(out.numpy(), np.tanh(x) @ y * (k + 2.5), rtol=1e-5)
    assert len(inlined) == 1
    x = tg.asarray(rng.standard_normal((3, 3)).astype(np.float32))
    np.testing.assert_allclose(f(x, x, x).numpy(), np.tanh(x.numpy()) @ x.numpy(), rtol=1e-5)  # another structure
    np.testing.assert_allclose(tnp.linalg.solve(x + 3 * tnp.eye(3), tnp.ones(3)).numpy(),
                               np.linalg.solve(x.numpy() + 3 * np.eye(3), np.ones(3)), rtol=1e-5)
    assert len(inlined) == 3


def test_a_graph_whose_inlined_form_reads_fewer_inputs_gets_its_own_program():
    """`function(lambda a, b: b)(x, x * x)` inlines to `x * x`, the schedule of an eager `x * x` seen before, but it
    has one input more (the unused `a`): a program kept from the first graph wrote its result over that input, here
    the interned buffer of the constant 2.0's fifth use, so a later graph reading 2.0 there read 4.0 (the survey of
    `jvp(checkpoint(f))` against JAX found it: `checkpoint` is such a function)."""
    x = tnp.full((3,), 2.0)
    np.testing.assert_array_equal((x * x).numpy(), [4.0] * 3)
    y = tg.function(lambda a, b: b)(tnp.full((3,), 2.0), tnp.full((3,), 2.0) * tnp.full((3,), 2.0))
    np.testing.assert_array_equal(y.numpy(), [4.0] * 3)
    x = tnp.full((3,), 2.0)
    np.testing.assert_allclose((tnp.sin(x) + tnp.cos(x) + x + x + x + x).numpy(), [np.sin(2.0) + np.cos(2.0) + 8] * 3,
                               rtol=1e-6)


def test_a_body_holding_a_concrete_buffer_is_an_internal_error():
    # SPEC: a body holds only PARAMs. A template is scheduled once for every call, so a buffer in it would be the
    # template's own and read as zeros (silent zero gradients a differential check found); scheduling one raises
    from tgfx.lowering.schedule import template_of
    x = tg.asarray(arr(3))
    body = UOp(Ops.TUPLE, None, ((x * 2).uop,))
    with pytest.raises(RuntimeError, match=r"internal error: the body .* holds a concrete buffer \(float32\[3\] on "
                                           rf"{x.device}\)"):
        template_of(body)
