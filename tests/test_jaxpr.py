"""tg.make_jaxpr: the traced graph printed like jax.make_jaxpr, one equation per op, computed without running anything.
"""
from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.jaxpr import Jaxpr, Literal, Var

F3 = np.ones(3, np.float32)
M34 = np.arange(12, dtype=np.float32).reshape(3, 4)


def lines(j: Jaxpr) -> list[str]:
    return str(j).splitlines()


def test_printout_is_jax_shaped() -> None:
    j = tg.make_jaxpr(lambda x, y: x * y + 1.0)(F3, F3)
    assert str(j) == ("{ lambda ; a:f32[3] b:f32[3]. let\n"
                      "    c:f32[3] = mul a b\n"
                      "    d:f32[3] = add c 1.0\n"
                      "  in (d,) }")
    assert [e.primitive for e in j.eqns] == ["mul", "add"]
    assert j.invars == (Var("a", (3,), tg.dtypes.float32), Var("b", (3,), tg.dtypes.float32))
    assert j.eqns[1].invars[1] == Literal(1.0, tg.dtypes.float32)
    assert j.outvars == (j.eqns[1].outvars[0],)
    assert repr(j) == str(j) == j.pretty_print()


def test_module_docstring_example() -> None:
    j = tg.make_jaxpr(lambda x, y: tnp.sum(tnp.sin(x) * y))(F3, F3)
    assert str(j) == ("{ lambda ; a:f32[3] b:f32[3]. let\n"
                      "    c:f32[3] = sin a\n"
                      "    d:f32[3] = mul c b\n"
                      "    e:f32[1] = reduce_sum[axes=(0,)] d\n"
                      "    f:f32[] = reshape[shape=()] e\n"
                      "  in (f,) }")


def test_names_every_input_and_op_with_types_and_args() -> None:
    def f(x: tg.Tensor, i: tg.Tensor) -> tuple[tg.Tensor, tg.Tensor]:
        return (x.T * 2).reshape(2, 6).max(axis=1), x.astype(tg.dtypes.int32)[:, 1:3] + i
    text = str(tg.make_jaxpr(f)(tg.asarray(M34), tg.asarray(np.int32(1))))
    assert text.startswith("{ lambda ; a:f32[3,4] b:i32[]. let\n")
    for line in ["c:f32[4,3] = permute[axes=(1, 0)] a", "d:f32[4,3] = mul c 2.0",
                 "e:f32[2,6] = reshape[shape=(2, 6)] d", "f:f32[2,1] = reduce_max[axes=(1,)] e",
                 "h:i32[3,4] = cast a", "i:i32[3,2] = shrink[bounds=((0, 3), (1, 3))] h"]:
        assert f"    {line}\n" in text, line
    assert re.search(r"in \(g, [a-z]+\) }$", text)


def test_grad_inside_the_function() -> None:
    def step(w: tg.Tensor, x: tg.Tensor) -> tuple[tg.Tensor, tg.Tensor]:
        loss, g = tg.value_and_grad(lambda w: tnp.sum(tnp.tanh(x @ w) ** 2))(w)
        return loss, w - 0.1 * g
    j = tg.make_jaxpr(step)(np.ones((4, 2), np.float32), M34)
    text = str(j)
    assert text.startswith("{ lambda ; a:f32[4,2] b:f32[3,4]. let")
    prims = [e.primitive for e in j.eqns]
    assert "tanh" in prims and "reduce_sum" in prims and prims.count("mul") >= 3   # forward and backward
    assert [v.shape for v in j.outvars] == [(), (4, 2)]
    # the backward's product with x.T: a reduce over the batch axis of x
    assert any(e.primitive == "reduce_sum" and e.outvars[0].shape in ((1, 4, 2), (4, 2, 1), (4, 1, 2))
               for e in j.eqns)


def test_grad_through_a_function_prints_the_backward_body() -> None:
    @tg.function
    def inner(a: tg.Tensor) -> tg.Tensor:
        return tnp.exp(a) * 3.0
    text = str(tg.make_jaxpr(tg.grad(lambda a: inner(a).sum()))(F3))
    assert re.search(r"c:f32\[3\] = function\[name=\S*inner_backward\] a b\n", text)
    assert "      body={ lambda ; " in text
    assert re.search(r"\n {10}[a-z]+:f32\[3\] = exp [a-z]+\n", text)   # the nested body is indented under its call


class Batch(NamedTuple):
    x: tg.Tensor
    y: tg.Tensor


def test_pytree_inputs_are_one_variable_per_leaf() -> None:
    def loss(params: dict, batch: Batch) -> tg.Tensor:
        pred = batch.x @ params["w"] + params["b"]
        return tnp.mean((pred - batch.y) ** 2)
    params = {"w": np.ones((4, 2), np.float32), "b": np.zeros(2, np.float32)}
    batch = Batch(tg.asarray(M34), tg.asarray(np.ones((3, 2), np.float32)))
    j = tg.make_jaxpr(loss)(params, batch)
    # leaves in pytree order: dict keys sorted (b, w), then the NamedTuple's fields
    assert [(v.name, v.shape) for v in j.invars] == [("a", (2,)), ("b", (4, 2)), ("c", (3, 4)), ("d", (3, 2))]
    assert lines(j)[0] == "{ lambda ; a:f32[2] b:f32[4,2] c:f32[3,4] d:f32[3,2]. let"
    assert j.outvars[0].shape == ()


def test_runs_no_kernel() -> None:
    x = tg.asarray(M34) * 2   # a lazy input: tracing must not compute it either
    tg.counters.reset()

    @tg.jit
    def inner(a: tg.Tensor) -> tg.Tensor:
        return tnp.sin(a) + 1

    def f(a: tg.Tensor) -> tuple[tg.Tensor, tg.Tensor]:
        g = tg.grad(lambda v: tnp.sum(inner(v) ** 2))(a)
        s = tg.lax.fori_loop(0, 3, lambda i, c: c + a[i], tnp.zeros(4))
        return g, tg.vmap(lambda r: r.sum())(a) + s.sum()
    j = tg.make_jaxpr(f)(x)
    assert tg.counters.kernel_count == 0 and tg.counters.compile_count == 0 and tg.counters.schedule_count == 0
    assert inner.trace_count == 0   # a jit inside a trace is inlined as a FUNCTION, never compiled
    assert "function[name=" in str(j) and "loop[name=" in str(j)


def test_loops_and_branches_print_their_bodies() -> None:
    def f(x: tg.Tensor) -> tuple[tg.Tensor, tg.Tensor, tg.Tensor]:
        s = tg.lax.fori_loop(0, 3, lambda i, c: c * 2.0, x)
        w = tg.lax.while_loop(lambda v: v.sum() < 100.0, lambda v: v + 1.0, x)
        b = tg.lax.cond(x.sum() > 0, lambda v: v + 1.0, lambda v: v - 1.0, x)
        return s, w, b
    j = tg.make_jaxpr(f)(F3)
    loops = [e for e in j.eqns if e.primitive == "loop"]
    assert [e.params["length"] for e in loops] == [3, None]
    assert loops[1].params.get("cond") is True
    assert [name for name, _ in loops[0].bodies] == ["body"] and [n for n, _ in loops[1].bodies] == ["body", "cond"]
    body = loops[0].bodies[0][1]
    assert [v.shape for v in body.invars] == [(), (3,)] and body.invars[0].dtype == tg.dtypes.int64   # step, carry
    assert [e.primitive for e in body.eqns] == ["mul"]
    sw = next(e for e in j.eqns if e.primitive == "switch")
    assert [n for n, _ in sw.bodies] == ["branch0", "branch1"]
    # names never repeat across nested bodies
    names = re.findall(r"\b([a-z]+):[a-z0-9]+\[", str(j))
    assert len(names) == len(set(names))


def test_closure_constants_are_constvars() -> None:
    c = tg.asarray(np.arange(3, dtype=np.float32))
    j = tg.make_jaxpr(lambda x: x * c)(F3)
    assert lines(j)[0] == "{ lambda a:f32[3]; b:f32[3]. let"
    assert lines(j)[1] == "    c:f32[3] = mul b a"
    assert len(j.consts) == 1 and j.consts[0].shape == (3,)
    np.testing.assert_array_equal(j.consts[0].numpy(), np.arange(3, dtype=np.float32))


def test_static_argnums_and_constants() -> None:
    j = tg.make_jaxpr(lambda x, n, scale: tnp.zeros(n) + x.sum() * scale, static_argnums=(1,))(F3, 4, 2.5)
    assert len(j.invars) == 1   # n is static, and a Python scalar is baked in as under jit
    text = str(j)
    assert "mul " in text and " 2.5\n" in text
    assert j.outvars[0].shape == (4,)
    with pytest.raises(ValueError, match=r"static_argnums \(3,\) out of range for 3"):
        tg.make_jaxpr(lambda x, n, s: x, static_argnums=3)(F3, 1, 2)


def test_a_constant_result_and_an_identity() -> None:
    assert str(tg.make_jaxpr(lambda x: x)(F3)) == "{ lambda ; a:f32[3]. let\n  in (a,) }"
    j = tg.make_jaxpr(lambda x: (x, tnp.zeros((2, 2))))(F3)
    assert lines(j)[1] == "    b:f32[2,2] = broadcast[shape=(2, 2)] 0.0"
    assert lines(j)[-1] == "  in (a, b) }"


def test_dtypes_are_short() -> None:
    j = tg.make_jaxpr(lambda x: (x.astype(tg.dtypes.bfloat16), x > 0, x.astype(tg.dtypes.uint8)))(F3)
    assert [str(e.outvars[0].typed).split(":")[1] for e in j.eqns] == ["bf16[3]", "bool[3]", "u8[3]"]


def test_errors() -> None:
    with pytest.raises(TypeError, match="make_jaxpr: expected a callable"):
        tg.make_jaxpr(3)
    with pytest.raises(TypeError, match="static_argnums must be ints"):
        tg.make_jaxpr(lambda x: x, static_argnums=("x",))
    with pytest.raises(tg.ConcretizationError, match="argument x"):
        tg.make_jaxpr(lambda x: x if float(x.sum()) > 0 else -x)(F3)


def test_a_custom_kernel_is_one_opaque_call() -> None:
    from tgfx.kernel import custom_kernel, krange, load, sink, store

    def f(x: tg.Tensor) -> tg.Tensor:
        y = custom_kernel(lambda o, i: sink(store(o, krange(4, 0), load(i, krange(4, 0)))), x * 2,
                          outputs=[((4,), "float32")], name="copy4")
        return y + 1
    assert lines(tg.make_jaxpr(f)(np.ones(4, np.float32)))[1:4] == [
        "    b:f32[4] = mul a 2.0", "    c:f32[4] = call[name=copy4] b", "    d:f32[4] = add c 1.0"]
