"""Weak types (JAX's weak_type) through control flow and vmap: `tg.lax.scan`, `fori_loop`, `while_loop`, `cond`,
`switch`, `map` and `vmap`, under `jit`, `grad` and `jvp` too.

Every expected type and value below is what jax 0.10.2 gives for the same program (written as `jax.typeof` prints it:
`~` in front when weakly typed); the tests do not import jax. The rules they pin:

- a Python scalar in a loop's init is a weakly typed carry; when the body returns another dtype for it (a float16 `x`
  times it), it takes the JAX result type of the two and the body is traced once more (JAX's
  `_promote_weak_typed_input`), so `scan(lambda c, x: (c * x, c), 1.0, xs16)` carries a float16;
- a carry that still changes type after that (or a strongly typed one that changes at all) is an error naming its
  pytree path, both types and a fix;
- results are weakly typed where the body returned weakly typed values; a Python-int-bounded `fori_loop`'s `i` is;
- `cond` / `switch` branches must agree on dtypes (weak typing aside, no promotion between them); the results take
  the first branch's weak typing (false_fun's for `cond`);
- `vmap` keeps the weak typing of its arguments and of what the function returns.
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
from tgfx import lax
from tgfx.tree import keystr, tree_flatten_with_path

f16 = tnp.float16


def types_and_values(out: Any) -> list[tuple[str, str, Any]]:
    """(pytree path, `typeof` as JAX prints it, value as a list) for every leaf of `out`."""
    pairs, _ = tree_flatten_with_path(out)
    return [(keystr(p), str(tg.typeof(x)), np.asarray(x).tolist()) for p, x in pairs]


def x16() -> tg.Tensor:
    return tnp.ones(3, f16)


def s16() -> tg.Tensor:
    return tnp.asarray(2, f16)


def weak_vec() -> tg.Tensor:
    """A weakly typed float32[3] of 2.0s (a broadcast Python scalar), as `jnp.broadcast_to(jnp.asarray(2.0), (3,))`."""
    return tnp.broadcast_to(tnp.asarray(2.0), (3,))


# (name, program, JAX's [(path, type, value)])
CASES: list[tuple[str, Callable[[], Any], list[tuple[str, str, Any]]]] = [
    # ---- scan: a weak init takes the body's type ----
    ("scan weak init, float16 body", lambda: lax.scan(lambda c, x: (c * x, c), 1.0, x16()),
     [("[0]", "float16[]", 1.0), ("[1]", "float16[3]", [1.0, 1.0, 1.0])]),
    ("scan weak init stays weak", lambda: lax.scan(lambda c, x: (c + 1.0, c), 0.0, None, length=3),
     [("[0]", "~float32[]", 3.0), ("[1]", "~float32[3]", [0.0, 1.0, 2.0])]),
    ("scan weak init, float32 body: only weakness differs, no retrace",
     lambda: lax.scan(lambda c, x: (c + x, c), 0.0, tnp.arange(3.0)),
     [("[0]", "float32[]", 3.0), ("[1]", "~float32[3]", [0.0, 0.0, 1.0])]),
    ("scan weak int init, float body", lambda: lax.scan(lambda c, x: (c + x, c), 0, tnp.arange(3.0)),
     [("[0]", "float32[]", 3.0), ("[1]", "float32[3]", [0.0, 0.0, 1.0])]),
    ("scan weak int init, float16 body", lambda: lax.scan(lambda c, x: (c + x, c), 0, x16()),
     [("[0]", "float16[]", 3.0), ("[1]", "float16[3]", [0.0, 1.0, 2.0])]),
    ("scan weak int init, weak float body", lambda: lax.scan(lambda c, x: (c + 1.5, c), 0, None, length=3),
     [("[0]", "float32[]", 4.5), ("[1]", "float32[3]", [0.0, 1.5, 3.0])]),
    ("scan weak int init, int8 body", lambda: lax.scan(lambda c, x: (c + x, c), 0, tnp.ones(3, tnp.int8)),
     [("[0]", "int8[]", 3), ("[1]", "int8[3]", [0, 1, 2])]),
    ("scan weak int init, int16 body",
     lambda: lax.scan(lambda c, x: (c * x, c), 1, tnp.arange(3, dtype=tnp.int16) + 1),
     [("[0]", "int16[]", 6), ("[1]", "int16[3]", [1, 1, 2])]),
    ("scan weak float init, bfloat16 body", lambda: lax.scan(lambda c, x: (c + x, c), 0.0, tnp.ones(3, tnp.bfloat16)),
     [("[0]", "bfloat16[]", 3.0), ("[1]", "bfloat16[3]", [0.0, 1.0, 2.0])]),
    ("scan weak complex init, float16 body", lambda: lax.scan(lambda c, x: (c * x, c), 1j, x16()),
     [("[0]", "complex64[]", 1j), ("[1]", "~complex64[3]", [1j, 1j, 1j])]),
    ("scan weak float init, complex64 body", lambda: lax.scan(lambda c, x: (c * x, c), 1.0, tnp.ones(3, tnp.complex64)),
     [("[0]", "complex64[]", 1 + 0j), ("[1]", "complex64[3]", [1 + 0j] * 3)]),
    ("scan weak int init, body casts to int16",
     lambda: lax.scan(lambda c, x: ((c + x).astype(tnp.int16), c), 0, x16()),
     [("[0]", "int16[]", 3), ("[1]", "int16[3]", [0, 1, 2])]),
    ("scan strong float32 init, float16 body", lambda: lax.scan(lambda c, x: (c * x, c), tnp.float32(1), x16()),
     [("[0]", "float32[]", 1.0), ("[1]", "float32[3]", [1.0, 1.0, 1.0])]),
    ("scan dict carry: one leaf promoted, one kept weak",
     lambda: lax.scan(lambda c, x: ({"a": c["a"] * x, "b": c["b"] + 1}, None), {"a": 1.0, "b": 0}, x16()),
     [("[0]['a']", "float16[]", 1.0), ("[0]['b']", "~int32[]", 3)]),
    ("scan strong carry, body returns a Python float", lambda: lax.scan(lambda c, x: (1.0, c), tnp.float32(0),
                                                                        None, length=2),
     [("[0]", "~float32[]", 1.0), ("[1]", "float32[2]", [0.0, 1.0])]),
    ("scan strong int carry, body returns a Python int", lambda: lax.scan(lambda c, x: (1, c), tnp.int32(0),
                                                                          None, length=2),
     [("[0]", "~int32[]", 1), ("[1]", "int32[2]", [0, 1])]),
    ("scan nested fori", lambda: lax.scan(lambda c, x: (lax.fori_loop(0, 2, lambda i, d: d * x, c), c), 1.0, x16()),
     [("[0]", "float16[]", 1.0), ("[1]", "float16[3]", [1.0, 1.0, 1.0])]),
    # ---- scan: weak xs and ys ----
    ("scan weak xs, float16 carry", lambda: lax.scan(lambda c, x: (c + x, x), tnp.float16(0), weak_vec()),
     [("[0]", "float16[]", 6.0), ("[1]", "~float32[3]", [2.0, 2.0, 2.0])]),
    ("scan weak xs, weak carry", lambda: lax.scan(lambda c, x: (c + x, x), 0.0, weak_vec()),
     [("[0]", "~float32[]", 6.0), ("[1]", "~float32[3]", [2.0, 2.0, 2.0])]),
    ("scan weak xs, computed ys", lambda: lax.scan(lambda c, x: (c, x * 2), 0.0, weak_vec()),
     [("[0]", "~float32[]", 0.0), ("[1]", "~float32[3]", [4.0, 4.0, 4.0])]),
    ("scan Python-scalar ys", lambda: lax.scan(lambda c, x: (c, 1.0), 0.0, x16()),
     [("[0]", "~float32[]", 0.0), ("[1]", "~float32[3]", [1.0, 1.0, 1.0])]),
    # ---- fori_loop ----
    ("fori weak init, float16 body", lambda: lax.fori_loop(0, 3, lambda i, c: c + s16(), 0.0),
     [("", "float16[]", 6.0)]),
    ("fori weak init stays weak", lambda: lax.fori_loop(0, 3, lambda i, c: c + 1.0, 0.0),
     [("", "~float32[]", 3.0)]),
    ("fori weak i, weak float carry", lambda: lax.fori_loop(0, 3, lambda i, c: c + i, 0.0),
     [("", "~float32[]", 3.0)]),
    ("fori weak i, weak int carry", lambda: lax.fori_loop(0, 3, lambda i, c: c + i, 0),
     [("", "~int32[]", 3)]),
    ("fori weak i returned", lambda: lax.fori_loop(0, 3, lambda i, c: i * 1, 0), [("", "~int32[]", 2)]),
    ("fori weak i, float16 body", lambda: lax.fori_loop(0, 3, lambda i, c: c + i * s16(), 0.0),
     [("", "float16[]", 6.0)]),
    ("fori known Tensor bounds: weak i", lambda: lax.fori_loop(tnp.int32(0), tnp.int32(3), lambda i, c: c + i, 0),
     [("", "~int32[]", 3)]),
    ("fori Tensor bounds, float16 body", lambda: lax.fori_loop(tnp.int32(0), tnp.int32(3), lambda i, c: c + s16(), 0.0),
     [("", "float16[]", 6.0)]),
    # ---- while_loop ----
    ("while weak carry", lambda: lax.while_loop(lambda c: c < 10, lambda c: c * 2.0, 1.0), [("", "~float32[]", 16.0)]),
    ("while weak init, float16 body", lambda: lax.while_loop(lambda c: c < 10, lambda c: c * s16(), 1.0),
     [("", "float16[]", 16.0)]),
    ("while tuple carry", lambda: lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * s16()), (0, 1.0)),
     [("[0]", "~int32[]", 10), ("[1]", "float16[]", 1024.0)]),
    ("while weak int carry, float cond", lambda: lax.while_loop(lambda c: c < 3.0, lambda c: c + 1, 0),
     [("", "~int32[]", 3)]),
    ("while counter and float16", lambda: lax.while_loop(lambda c: c[1] < 5, lambda c: (c[0] * s16(), c[1] + 1),
                                                         (1.0, 0)),
     [("[0]", "float16[]", 32.0), ("[1]", "~int32[]", 5)]),
    # ---- cond and switch: the first branch's weak typing ----
    ("cond both weak", lambda: lax.cond(True, lambda: 1.0, lambda: 2.0), [("", "~float32[]", 1.0)]),
    ("cond weak true_fun, strong false_fun", lambda: lax.cond(True, lambda: 1.0, lambda: tnp.float32(2)),
     [("", "float32[]", 1.0)]),
    ("cond strong true_fun, weak false_fun", lambda: lax.cond(True, lambda: tnp.float32(2), lambda: 1.0),
     [("", "~float32[]", 2.0)]),
    ("cond weak operand", lambda: lax.cond(True, lambda x: x * 2, lambda x: x + 1, 3.0), [("", "~float32[]", 6.0)]),
    ("cond weak operand returned", lambda: lax.cond(True, lambda x: x, lambda x: x, 2.0), [("", "~float32[]", 2.0)]),
    ("cond int8 operand, weak float results", lambda: lax.cond(True, lambda x: x * 2.5, lambda x: x + 1.5,
                                                               tnp.int8(2)),
     [("", "~float32[]", 5.0)]),
    ("cond Python ints", lambda: lax.cond(True, lambda: 1, lambda: 2), [("", "~int32[]", 1)]),
    ("cond weak operand, one branch casts", lambda: lax.cond(False, lambda x: x * 2, lambda x: x.astype(tnp.float32),
                                                             3.0),
     [("", "float32[]", 3.0)]),
    ("switch both weak", lambda: lax.switch(1, [lambda x: x, lambda x: x + 1], 2.0), [("", "~float32[]", 3.0)]),
    ("switch weak branch 0, strong branch 1", lambda: lax.switch(1, [lambda x: x, lambda x: x.astype(tnp.float32)],
                                                                 2.0),
     [("", "~float32[]", 2.0)]),
    ("switch strong branch 0", lambda: lax.switch(2, [lambda: tnp.float32(1), lambda: 1.0, lambda: 2.0]),
     [("", "float32[]", 2.0)]),
    # ---- map ----
    ("map strong xs", lambda: lax.map(lambda x: x * 2.0, tnp.arange(3.0)), [("", "float32[3]", [0.0, 2.0, 4.0])]),
    ("map float16 xs", lambda: lax.map(lambda x: x * 2.0, x16()), [("", "float16[3]", [2.0, 2.0, 2.0])]),
    ("map returns a Python float", lambda: lax.map(lambda x: 2.0, x16()), [("", "~float32[3]", [2.0, 2.0, 2.0])]),
    ("map int xs, weak float results", lambda: lax.map(lambda x: x * 2.0, tnp.arange(3)),
     [("", "~float32[3]", [0.0, 2.0, 4.0])]),
    ("map weak xs", lambda: lax.map(lambda x: (x, x * 2), weak_vec()),
     [("[0]", "~float32[3]", [2.0, 2.0, 2.0]), ("[1]", "~float32[3]", [4.0, 4.0, 4.0])]),
    ("associative_scan of weak elems is strong", lambda: lax.associative_scan(lambda a, b: a + b, weak_vec()),
     [("", "float32[3]", [2.0, 4.0, 6.0])]),
    # ---- vmap ----
    ("vmap weak argument", lambda: tg.vmap(lambda x: x * 2)(weak_vec()), [("", "~float32[3]", [4.0, 4.0, 4.0])]),
    ("vmap weak argument, float16 operand", lambda: tg.vmap(lambda x: x * s16())(weak_vec()),
     [("", "float16[3]", [4.0, 4.0, 4.0])]),
    ("vmap returns a Python float", lambda: tg.vmap(lambda x: 2.0)(x16()), [("", "~float32[3]", [2.0, 2.0, 2.0])]),
    ("vmap int argument, weak float result", lambda: tg.vmap(lambda x: x + 1.0)(tnp.arange(3)),
     [("", "~float32[3]", [1.0, 2.0, 3.0])]),
    ("vmap unmapped Python scalar", lambda: tg.vmap(lambda x, y: x * y, in_axes=(0, None))(x16(), 2.0),
     [("", "float16[3]", [2.0, 2.0, 2.0])]),
    ("vmap unmapped Python scalar returned", lambda: tg.vmap(lambda x, y: y, in_axes=(0, None))(x16(), 2.0),
     [("", "~float32[3]", [2.0, 2.0, 2.0])]),
    ("vmap unmapped weak Tensor", lambda: tg.vmap(lambda x, w: x + w, in_axes=(0, None))(tnp.ones(3, tnp.int32),
                                                                                         tnp.asarray(2.0)),
     [("", "~float32[3]", [3.0, 3.0, 3.0])]),
    ("vmap out_axes None keeps weak", lambda: tg.vmap(lambda x: (x * 2, 1.0), out_axes=(0, None))(x16()),
     [("[0]", "float16[3]", [2.0, 2.0, 2.0]), ("[1]", "~float32[]", 1.0)]),
    ("vmap of vmap", lambda: tg.vmap(tg.vmap(lambda x: x + 1))(tnp.broadcast_to(tnp.asarray(1.0), (2, 3))),
     [("", "~float32[2,3]", [[2.0] * 3] * 2)]),
    ("vmap of scan", lambda: tg.vmap(lambda x: lax.scan(lambda c, y: (c * y, c), 1.0, x))(tnp.ones((2, 3), f16)),
     [("[0]", "float16[2]", [1.0, 1.0]), ("[1]", "float16[2,3]", [[1.0] * 3] * 2)]),
    ("vmap of scan over weak xs",
     lambda: tg.vmap(lambda x: lax.scan(lambda c, y: (c + y, y * 2), 0.0, x))(tnp.broadcast_to(tnp.asarray(1.0),
                                                                                                (2, 3))),
     [("[0]", "~float32[2]", [3.0, 3.0]), ("[1]", "~float32[2,3]", [[2.0] * 3] * 2)]),
    ("vmap of fori", lambda: tg.vmap(lambda x: lax.fori_loop(0, 3, lambda i, c: c + x, 0.0))(x16()),
     [("", "float16[3]", [3.0, 3.0, 3.0])]),
    ("vmap of cond, batched predicate",
     lambda: tg.vmap(lambda p, x: lax.cond(p, lambda: 1.0, lambda: 2.0))(tnp.array([True, False]), tnp.ones(2)),
     [("", "~float32[2]", [1.0, 2.0])]),
    ("vmap of cond on weak operands",
     lambda: tg.vmap(lambda p, x: lax.cond(p, lambda x: x * 2, lambda x: x + 1, x))(tnp.array([True, False]),
                                                                                    weak_vec()[:2]),
     [("", "~float32[2]", [4.0, 3.0])]),
    ("vmap of switch", lambda: tg.vmap(lambda i: lax.switch(i, [lambda: 1.0, lambda: 2.0, lambda: 3.0]))(
        tnp.array([0, 2])),
     [("", "~float32[2]", [1.0, 3.0])]),
    ("vmap of while, batched predicate",
     lambda: tg.vmap(lambda x: lax.while_loop(lambda c: c < x, lambda c: c * 2.0, 1.0))(tnp.array([3.0, 10.0], f16)),
     [("", "~float32[2]", [4.0, 16.0])]),
]


@pytest.mark.parametrize("program,want", [pytest.param(p, w, id=n) for n, p, w in CASES])
def test_types_and_values_are_jaxs(program: Callable[[], Any], want: list[tuple[str, str, Any]]) -> None:
    got = types_and_values(program())
    assert [(p, t) for p, t, _ in got] == [(p, t) for p, t, _ in want]
    for (_, _, g), (_, _, w) in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-3)


# ---- under jit, grad and jvp ----
def test_jit_traces_a_weak_argument_once_and_promotes_the_carry() -> None:
    s = s16()
    f = tg.jit(lambda c: lax.fori_loop(0, 3, lambda i, c: c + s, c))
    assert types_and_values(f(0.0)) == [("", "float16[]", 6.0)]
    assert types_and_values(f(1.0)) == [("", "float16[]", 7.0)]
    assert f.trace_count == 1   # the body's second trace is part of the one trace, not a retrace
    assert types_and_values(f(tnp.float32(1.0))) == [("", "float32[]", 7.0)]   # a strong float32: its own signature
    assert f.trace_count == 2


def test_jit_keeps_weak_results_of_loops_and_branches() -> None:
    scan = tg.jit(lambda c: lax.scan(lambda c, x: (c + 1.0, c * 2), c, None, length=2))
    assert types_and_values(scan(0.5)) == [("[0]", "~float32[]", 2.5), ("[1]", "~float32[2]", [1.0, 3.0])]
    while_ = tg.jit(lambda c: lax.while_loop(lambda c: c < 10, lambda c: c * 2, c))
    assert types_and_values(while_(1.0)) == [("", "~float32[]", 16.0)]
    cond = tg.jit(lambda p, v: lax.cond(p, lambda v: v * 2, lambda v: v + 1, v))
    assert types_and_values(cond(tnp.asarray(True), 3.0)) == [("", "~float32[]", 6.0)]
    assert types_and_values(cond(tnp.asarray(False), 4.0)) == [("", "~float32[]", 5.0)]
    assert (scan.trace_count, while_.trace_count, cond.trace_count) == (1, 1, 1)


def test_jit_fori_with_traced_bounds() -> None:
    # traced bounds make JAX's while loop: i starts at lower, weakly typed only if lower is a Python int
    both = tg.jit(lambda lo, hi: lax.fori_loop(lo, hi, lambda i, c: c + i, 0))
    assert types_and_values(both(tnp.int32(0), tnp.int32(3))) == [("", "int32[]", 3)]
    upper = tg.jit(lambda hi: lax.fori_loop(0, hi, lambda i, c: c + i, 0))
    assert types_and_values(upper(tnp.int32(3))) == [("", "~int32[]", 3)]


def test_grad_and_jvp_through_a_promoted_carry() -> None:
    g = tg.grad(lambda x: lax.fori_loop(0, 3, lambda i, c: c * x, 1.0))(tnp.float16(2))
    assert types_and_values(g) == [("", "float16[]", 12.0)]
    g = tg.grad(lambda x: lax.scan(lambda c, y: (c * y, c), 1.0, x)[0])(tnp.arange(1.0, 4.0))
    assert types_and_values(g) == [("", "float32[3]", [6.0, 3.0, 2.0])]
    out, tangent = tg.jvp(lambda x: lax.fori_loop(0, 3, lambda i, c: c * x, 1.0), (tnp.float16(2),),
                          (tnp.float16(1),))
    assert types_and_values((out, tangent)) == [("[0]", "float16[]", 8.0), ("[1]", "float16[]", 12.0)]
    value, g = tg.value_and_grad(lambda x: lax.fori_loop(0, 3, lambda i, c: c * x, 1.0))(2.0)
    assert types_and_values((value, g)) == [("[0]", "~float32[]", 8.0), ("[1]", "~float32[]", 12.0)]


# ---- errors where JAX errors: they name the carry or output, both types and a fix ----
def test_weak_carry_that_changes_again_is_an_error() -> None:
    # JAX traces twice at most: c[0] takes float16, and then c[1] (given c[0]) changes too
    with pytest.raises(TypeError, match=r"changed the type of carry\[1\]: it received float32\[\] and returned "
                                        r"float16\[\].*init\[1\] is weakly typed .*tnp.asarray\(\.\.\., tnp.float16\)"):
        lax.scan(lambda c, x: ((c[1] * x, c[0]), None), (1.0, 1.0), x16())
    # a weak float with an int body: their result type is float32, which the body changes again
    with pytest.raises(TypeError, match=r"changed the type of carry: it received float32\[\] and returned int32\[\]"
                                        r".*init is weakly typed"):
        lax.scan(lambda c, x: (c.astype(tnp.int32) + x, c), 0.0, tnp.arange(3))
    with pytest.raises(TypeError, match=r"carry: it received float32\[\] and returned int32\[\]"):
        lax.scan(lambda c, x: (1, c), 0.0, None, length=2)   # a Python int for a Python float carry


def test_weak_carry_that_changes_shape_is_an_error() -> None:
    with pytest.raises(TypeError, match=r"carry: it received float16\[\] and returned float16\[2\].*give init the "
                                        r"shape \(2,\)"):
        lax.scan(lambda c, x: (c * tnp.ones(2, f16), c), 1.0, x16())
    with pytest.raises(TypeError, match=r"fori_loop: .* carry: it received float16\[\] and returned float16\[3\]"):
        lax.fori_loop(0, 3, lambda i, c: c + x16(), 0.0)


def test_strong_carry_is_not_promoted() -> None:
    with pytest.raises(TypeError, match=r"changed the type of carry: it received float16\[\] and returned "
                                        r"float32\[\].*weakly typed.*tnp.asarray\(v, tnp.float16\)"):
        lax.scan(lambda c, x: (1.0, c), tnp.asarray(0, f16), None, length=2)   # a Python float for a float16 carry
    with pytest.raises(TypeError, match=r"carry: it received float32\[\] and returned int32\[\]"):
        lax.scan(lambda c, x: (1, c), tnp.float32(0), None, length=2)
    with pytest.raises(TypeError, match=r"carry: it received bool\[\] and returned int32\[\]"):
        lax.scan(lambda c, x: (c + 1, c), True, None, length=2)   # a Python bool is strongly typed


@pytest.mark.parametrize("who,run", [
    ("cond", lambda: lax.cond(True, lambda: 1.0, lambda: s16())),
    ("cond", lambda: lax.cond(True, lambda x: x * s16(), lambda x: x + 1, 3.0)),
    ("switch", lambda: lax.switch(1, [lambda: 1.0, lambda: s16()])),
])
def test_branches_are_not_promoted_to_each_other(who: str, run: Callable[[], Any]) -> None:
    with pytest.raises(TypeError, match=rf"{who}: every branch must return .* float\d+\[\] and .* float\d+\[\] for "
                                        r"output; the result of .* is weakly typed .*make it float16"):
        run()


def test_branch_mismatch_names_the_output_path_and_cond_names_false_fun() -> None:
    with pytest.raises(TypeError, match=r"false_fun \(.*\) returns int8\[\] and true_fun \(.*\) returns int32\[\] for "
                                        r"output\['a'\]; the result of true_fun .* make it int8"):
        lax.cond(True, lambda: {"a": 1}, lambda: {"a": tnp.int8(2)})


def test_cond_inside_a_scan_sees_the_weak_carry() -> None:
    # the first trace runs the cond on the weak float32 carry: its branches return float16 and float32, as in JAX
    with pytest.raises(TypeError, match="every branch must return"):
        lax.scan(lambda c, x: (lax.cond(x > 0, lambda: c * x, lambda: c), None), 1.0, x16())


# ---- fori_loop's index type: the bounds' (JAX 0.10.2, `jax.typeof(i)` in the body) ----
def index_type(lower: Any, upper: Any, traced: str) -> str:
    """`typeof(i)` in a fori_loop's body: `traced` "none" (eager), "upper" (jit of upper alone) or "both"."""
    seen = []

    def run(lo: Any, hi: Any) -> Any:
        def body(i: Any, c: Any) -> Any:
            seen.append(str(tg.typeof(i)))
            return c + i
        return lax.fori_loop(lo, hi, body, 0)
    out = run(lower, upper) if traced == "none" else tg.jit(lambda h: run(lower, h))(upper) if traced == "upper" \
        else tg.jit(run)(lower, upper)
    assert int(np.asarray(out)) == 3   # 0 + 1 + 2
    return seen[0]


INTS = {"int8": tnp.int8, "int16": tnp.int16, "int32": tnp.int32, "uint8": tnp.uint8, "uint32": tnp.uint32}


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(sorted(INTS)), st.sampled_from(["none", "upper", "both"]), st.booleans())
def test_fori_index_takes_the_bounds_type(name: str, traced: str, python_lower: bool) -> None:
    # known bounds: JAX's scan from the Python int `int(lower)`, a weak int32 whatever their type; traced: a while loop
    # over lower converted to the bounds' type, which a Python int lower takes from a signed upper (an unsigned one is
    # an error there, as two different types are)
    d = INTS[name]
    lower = 0 if python_lower else np.dtype(name).type(0)
    upper = np.dtype(name).type(3) if traced == "none" else tnp.asarray(3, d)
    if python_lower and name.startswith("uint"):
        with pytest.raises(TypeError, match=f"fori_loop: lower and upper must have equal types, got int32 and {name}"):
            index_type(lower, upper, traced)
    elif traced == "none":
        assert index_type(lower, upper, traced) == "~int32[]"
    elif python_lower and name == "int32":
        assert index_type(lower, upper, traced) == "~int32[]"   # no conversion: lower stays a weak int
    else:
        assert index_type(lower, upper, traced) == f"{name}[]"


def test_fori_index_under_x64_and_mixed_bounds() -> None:
    with tg.enable_x64():
        assert index_type(0, 3, "none") == "~int64[]"
        assert index_type(0, 3, "upper") == "~int64[]"
        assert index_type(np.int64(0), tnp.asarray(3, tnp.int64), "upper") == "int64[]"
        assert index_type(tnp.asarray(0, tnp.int16), 3, "upper") == "int16[]"   # the weak upper takes int16
    assert index_type(tnp.asarray(0), tnp.asarray(3), "both") == "~int32[]"    # both weak: lower's weak int32
    with pytest.raises(TypeError, match="got int32 and int16"):
        lax.fori_loop(tnp.asarray(0, tnp.int32), tnp.asarray(3, tnp.int16), lambda i, c: c, 0)
    with pytest.raises(TypeError, match="got uint8 and int16"):
        lax.fori_loop(np.uint8(0), np.int16(3), lambda i, c: c, 0)
