"""Weak types (JAX's weak_type) through `jvp`, `vjp`, `linearize`, `jacfwd`, `jacrev`, `hessian`, `custom_jvp`,
`custom_vjp` and `checkpoint`.

Every expected type below is what jax 0.10.2 gives for the same program (written as `jax.typeof` prints it: `~` in
front when weakly typed); the tests do not import jax. The rules they pin:

- `jvp`: the primal outputs as the function computed them, and each output tangent of its primal's type (JAX gives a
  tangent its primal's weak type whatever the tangent given: `jvp(f, (2.0,), (f32(1.0),))` is weak);
- `linearize`: the linear function computes as any function of the tangents given: a weak output's tangent is weak
  when the tangents it reads are (unlike `jvp`); a strongly typed output's tangent is strong;
- `vjp`: an input's cotangent is weak when the input is, unless a strongly typed cotangent reaches it through a weakly
  typed output (no conversion on that path gives back the input's weak type); `grad` follows, its cotangent being a
  one of the output's type;
- `jacrev` blocks take their input's type, `jacfwd` blocks their output's (JAX's `_possible_downcast`), zero blocks
  too; `hessian` = `jacfwd(jacrev)` so its input's; `jacfwd` of an integer output is zeros of that type.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.tree import keystr, tree_flatten_with_path


def types(out: Any) -> list[tuple[str, str]]:
    """(pytree path, `typeof` as JAX prints it) for every leaf of `out`."""
    pairs, _ = tree_flatten_with_path(out)
    return [(keystr(p), str(tg.typeof(x))) for p, x in pairs]


def f16(v: Any) -> tg.Tensor:
    return tnp.asarray(v, tnp.float16)


def f32(v: Any) -> tg.Tensor:
    return tnp.asarray(v, tnp.float32)


def sq(x: Any) -> Any:
    return x * x


def mix16(x: Any) -> Any:
    return x * f16(1.5)


def pair(o: Any, fn: Callable) -> tuple:
    return o, fn(o)


# (name, program, JAX's [(path, type)])
CASES: list[tuple[str, Callable[[], Any], list[tuple[str, str]]]] = [
    # ---- jvp ----
    ("jvp weak primal and tangent", lambda: tg.jvp(sq, (2.0,), (1.0,)), [("[0]", "~float32[]"), ("[1]", "~float32[]")]),
    ("jvp weak primal, strong tangent", lambda: tg.jvp(sq, (2.0,), (f32(1.0),)),
     [("[0]", "~float32[]"), ("[1]", "~float32[]")]),
    ("jvp strong primal, weak tangent", lambda: tg.jvp(sq, (f32(2.0),), (tnp.asarray(1.0),)),
     [("[0]", "float32[]"), ("[1]", "float32[]")]),
    ("jvp weak vector", lambda: tg.jvp(tnp.sin, (tnp.full((3,), 2.0),), (tnp.full((3,), 1.0),)),
     [("[0]", "~float32[3]"), ("[1]", "~float32[3]")]),
    ("jvp weak primal, float16 output", lambda: tg.jvp(mix16, (2.0,), (1.0,)),
     [("[0]", "float16[]"), ("[1]", "float16[]")]),
    ("jvp weak primal, strong float32 output", lambda: tg.jvp(lambda x: x * f32(3.0), (2.0,), (1.0,)),
     [("[0]", "float32[]"), ("[1]", "float32[]")]),
    ("jvp constant outputs", lambda: tg.jvp(lambda x: (x, 3.0, tnp.asarray(3.0), f32(1.0)), (2.0,), (1.0,)),
     [("[0][0]", "~float32[]"), ("[0][1]", "~float32[]"), ("[0][2]", "~float32[]"), ("[0][3]", "float32[]"),
      ("[1][0]", "~float32[]"), ("[1][1]", "~float32[]"), ("[1][2]", "~float32[]"), ("[1][3]", "float32[]")]),
    ("jvp two arguments", lambda: tg.jvp(lambda x, y: (x * y, x + 1.0), (2.0, f32(3.0)), (1.0, f32(1.0))),
     [("[0][0]", "float32[]"), ("[0][1]", "~float32[]"), ("[1][0]", "float32[]"), ("[1][1]", "~float32[]")]),
    ("jvp stop_gradient", lambda: tg.jvp(lambda x: tg.stop_gradient(x) * 2.0, (2.0,), (1.0,)),
     [("[0]", "~float32[]"), ("[1]", "~float32[]")]),
    ("jvp mixed pytree", lambda: tg.jvp(lambda d: d["a"] * d["b"] + d["c"],
                                        ({"a": 2.0, "b": f16(3.0), "c": tnp.asarray(1.0)},),
                                        ({"a": 1.0, "b": f16(1.0), "c": tnp.asarray(1.0)},)),
     [("[0]", "float16[]"), ("[1]", "float16[]")]),
    # ---- vjp ----
    ("vjp weak cotangent", lambda: tg.vjp(sq, 2.0)[1](1.0), [("[0]", "~float32[]")]),
    ("vjp weak output, strong cotangent", lambda: tg.vjp(sq, 2.0)[1](f32(1.0)), [("[0]", "float32[]")]),
    ("vjp strong input, weak cotangent", lambda: tg.vjp(sq, f32(2.0))[1](tnp.asarray(1.0)), [("[0]", "float32[]")]),
    ("vjp through a conversion", lambda: tg.vjp(mix16, 2.0)[1](f16(1.0)), [("[0]", "~float32[]")]),
    ("vjp two outputs, one strong cotangent", lambda: tg.vjp(lambda x: (x * 2.0, x * x), 2.0)[1]((1.0, f32(1.0))),
     [("[0]", "float32[]")]),
    ("vjp two outputs, strong one strongly typed",
     lambda: tg.vjp(lambda x: (x * 2.0, x * f32(3.0)), 2.0)[1]((1.0, f32(1.0))), [("[0]", "~float32[]")]),
    ("vjp unused input", lambda: tg.vjp(lambda x, y: y * 2.0, 2.0, 3.0)[1](f32(1.0)),
     [("[0]", "~float32[]"), ("[1]", "float32[]")]),
    ("vjp its own output as cotangent", lambda: pair(*tg.vjp(tnp.sin, tnp.full((3,), 2.0))),
     [("[0]", "~float32[3]"), ("[1][0]", "~float32[3]")]),
    ("vjp mixed pytree", lambda: pair(*tg.vjp(lambda d: d["a"] * d["b"] + d["c"],
                                              {"a": 2.0, "b": f16(3.0), "c": tnp.asarray(1.0)})),
     [("[0]", "float16[]"), ("[1][0]['a']", "~float32[]"), ("[1][0]['b']", "float16[]"),
      ("[1][0]['c']", "~float32[]")]),
    # ---- linearize ----
    ("linearize weak", lambda: (lambda o, f: (o, f(1.0), f(f32(1.0)), f(tnp.asarray(1.0))))(*tg.linearize(sq, 2.0)),
     [("[0]", "~float32[]"), ("[1]", "~float32[]"), ("[2]", "float32[]"), ("[3]", "~float32[]")]),
    ("linearize strong", lambda: (lambda o, f: (o, f(1.0), f(tnp.asarray(1.0))))(*tg.linearize(sq, f32(2.0))),
     [("[0]", "float32[]"), ("[1]", "float32[]"), ("[2]", "float32[]")]),
    ("linearize float16 output", lambda: (lambda o, f: (o, f(1.0)))(*tg.linearize(mix16, 2.0)),
     [("[0]", "float16[]"), ("[1]", "float16[]")]),
    ("linearize constant output", lambda: (lambda o, f: (o, f(1.0)))(*tg.linearize(lambda x: (x, 3.0), 2.0)),
     [("[0][0]", "~float32[]"), ("[0][1]", "~float32[]"), ("[1][0]", "~float32[]"), ("[1][1]", "~float32[]")]),
    # ---- jacfwd, jacrev, hessian ----
    ("jacfwd weak", lambda: tg.jacfwd(sq)(2.0), [("", "~float32[]")]),
    ("jacrev weak", lambda: tg.jacrev(sq)(2.0), [("", "~float32[]")]),
    ("hessian weak", lambda: tg.hessian(sq)(2.0), [("", "~float32[]")]),
    ("jacfwd weak vector", lambda: tg.jacfwd(tnp.sin)(tnp.full((3,), 2.0)), [("", "~float32[3,3]")]),
    ("jacrev weak vector", lambda: tg.jacrev(tnp.sin)(tnp.full((3,), 2.0)), [("", "~float32[3,3]")]),
    ("hessian weak vector", lambda: tg.hessian(lambda x: (x * x).sum())(tnp.full((3,), 2.0)), [("", "~float32[3,3]")]),
    ("jacfwd float16 output: the output's type", lambda: tg.jacfwd(mix16)(2.0), [("", "float16[]")]),
    ("jacrev float16 output: the input's type", lambda: tg.jacrev(mix16)(2.0), [("", "~float32[]")]),
    ("hessian float16 factor", lambda: tg.hessian(lambda x: x * x * f16(1.0))(2.0), [("", "~float32[]")]),
    ("hessian of a float16 output of float32", lambda: tg.hessian(lambda x: (x * x).astype(tnp.float16))(f32(2.0)),
     [("", "float32[]")]),
    ("jacrev float16 input, float32 output", lambda: tg.jacrev(lambda x: x.astype(tnp.float32) * 2)(f16(2.0)),
     [("", "float16[]")]),
    ("jacfwd float16 input, float32 output", lambda: tg.jacfwd(lambda x: x.astype(tnp.float32) * 2)(f16(2.0)),
     [("", "float32[]")]),
    ("jacfwd constant output", lambda: tg.jacfwd(lambda x: (x, 3.0 + 0 * x))(2.0),
     [("[0]", "~float32[]"), ("[1]", "~float32[]")]),
    ("jacrev two arguments", lambda: tg.jacrev(lambda x, y: x * y, argnums=(0, 1))(2.0, f16(3.0)),
     [("[0]", "~float32[]"), ("[1]", "float16[]")]),
    ("jacfwd two arguments", lambda: tg.jacfwd(lambda x, y: x * y, argnums=(0, 1))(2.0, f16(3.0)),
     [("[0]", "float16[]"), ("[1]", "float16[]")]),
    ("jacrev mixed pytree: a zero block takes its input's type",
     lambda: tg.jacrev(lambda d: (d["a"] * d["b"], d["c"] * 2.0))({"a": 2.0, "b": f16(3.0), "c": tnp.asarray(1.0)}),
     [("[0]['a']", "~float32[]"), ("[0]['b']", "float16[]"), ("[0]['c']", "~float32[]"),
      ("[1]['a']", "~float32[]"), ("[1]['b']", "float16[]"), ("[1]['c']", "~float32[]")]),
    ("jacfwd mixed pytree: a zero block takes its output's type",
     lambda: tg.jacfwd(lambda d: (d["a"] * d["b"], d["c"] * 2.0))({"a": 2.0, "b": f16(3.0), "c": tnp.asarray(1.0)}),
     [("[0]['a']", "float16[]"), ("[0]['b']", "float16[]"), ("[0]['c']", "float16[]"),
      ("[1]['a']", "~float32[]"), ("[1]['b']", "~float32[]"), ("[1]['c']", "~float32[]")]),
    # ---- checkpoint: its backward runs the function again on residuals that keep their weak types ----
    ("checkpoint grad, float16 factor", lambda: tg.grad(tg.checkpoint(mix16))(2.0), [("", "~float32[]")]),
    ("checkpoint vjp, float16 factor", lambda: pair(*tg.vjp(tg.checkpoint(mix16), tnp.full((3,), 2.0))),
     [("[0]", "float16[3]"), ("[1][0]", "~float32[3]")]),
    ("checkpoint jvp, float16 factor", lambda: tg.jvp(tg.checkpoint(mix16), (2.0,), (1.0,)),
     [("[0]", "float16[]"), ("[1]", "float16[]")]),
    ("checkpoint jvp weak", lambda: tg.jvp(tg.checkpoint(tnp.sin), (2.0,), (1.0,)),
     [("[0]", "~float32[]"), ("[1]", "~float32[]")]),
    ("jacfwd integer output", lambda: tg.jacfwd(lambda x: (x * 3).astype(tnp.int32))(tnp.ones(2)),
     [("", "int32[2,2]")]),
]


@pytest.mark.parametrize("program,want", [pytest.param(p, w, id=n) for n, p, w in CASES])
def test_types_are_jaxs(program: Callable[[], Any], want: list[tuple[str, str]]) -> None:
    assert types(program()) == want


def test_jacfwd_of_an_integer_output_is_zeros_and_jacrev_names_it() -> None:
    np.testing.assert_array_equal(tg.jacfwd(lambda x: (x * 3).astype(tnp.int32))(tnp.ones(2)).numpy(), np.zeros((2, 2)))
    with pytest.raises(TypeError, match=r"jacrev requires real-valued \(float\) outputs, but the output\['a'\] has "
                                        r"dtype int32; for integer outputs use tg.vjp directly"):
        tg.jacrev(lambda x: {"a": (x * 3).astype(tnp.int32)})(tnp.ones(2))


FLOATS = {"float16": tnp.float16, "bfloat16": tnp.bfloat16, "float32": tnp.float32}


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(sorted(FLOATS)), st.booleans(), st.sampled_from(["sin", "square", "scale", "float16 factor"]),
       st.sampled_from([(), (2,), (2, 3)]))
def test_every_transform_types_as_jax(dtype: str, weak_input: bool, fn: str, shape: tuple[int, ...]) -> None:
    """An input of `dtype` (or a weak float32 of `shape` when `weak_input`) through an elementwise function: jvp's
    tangent and linearize's are the output's type (the tangent given is the input itself), vjp's cotangent (the output
    as cotangent) and jacrev's blocks the input's, jacfwd's the output's; weak where the input is and the output too."""
    funs = {"sin": tnp.sin, "square": sq, "scale": lambda x: x * 3.0, "float16 factor": mix16}
    f = funs[fn]
    x = tnp.full(shape, 2.0) if weak_input else tnp.full(shape, 2.0, FLOATS[dtype])
    in_type = "float32" if weak_input else dtype
    out = f(x)
    out_type = str(tg.typeof(out)).split("[")[0]
    assert out_type.lstrip("~") == (in_type if fn != "float16 factor" else "float16" if weak_input else
                                    {"float32": "float32", "float16": "float16", "bfloat16": "float32"}[dtype])
    weak_out = out_type.startswith("~")
    assert weak_out == (weak_input and fn != "float16 factor")
    dims = ",".join(map(str, shape))
    jac_dims = ",".join(map(str, shape + shape))
    assert types(tg.jvp(f, (x,), (x,))) == [("[0]", f"{out_type}[{dims}]"), ("[1]", f"{out_type}[{dims}]")]
    o, f_jvp = tg.linearize(f, x)
    assert types((o, f_jvp(x))) == [("[0]", f"{out_type}[{dims}]"), ("[1]", f"{out_type}[{dims}]")]
    o, f_vjp = tg.vjp(f, x)
    weak_in = "~" if weak_input else ""
    assert types(f_vjp(o)) == [("[0]", f"{weak_in}{in_type}[{dims}]")]
    assert types(tg.jacrev(f)(x)) == [("", f"{weak_in}{in_type}[{jac_dims}]")]
    assert types(tg.jacfwd(f)(x)) == [("", f"{out_type}[{jac_dims}]")]
