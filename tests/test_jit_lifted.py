"""A jit made anew every step around a new Python float (a schedule's learning rate, a temperature): the kernel that
comes back with other constants is compiled once more with them as arguments, then never again
(`tgfx/lowering/lifted.py`); a kernel whose constants never change keeps them as literals."""
import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering import forget_compiled, lower_kernel
from tgfx.lowering.lifted import choose, float_uses, lift


def g(slot: int, n: int, dt=dtypes.float32) -> UOp:
    return UOp(Ops.DEFINE_GLOBAL, dt, (), (slot, n))


def scaled(*values: float, dt=dtypes.float32) -> UOp:
    """The kernel `out = (x * v0) * v1 ...` over 4 elements of slot 1, each constant broadcast from a scalar."""
    y = UOp(Ops.RESHAPE, dt, (g(1, 4, dt),), (4,))
    for v in values:
        c = UOp(Ops.EXPAND, dt, (UOp(Ops.RESHAPE, dt, (UOp.const(dt, v),), (1,)),), (4,))
        y = UOp(Ops.MUL, dt, (y, c))
    return UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, 4, dt), y)),))


def argument(slot: int, dt=dtypes.float32) -> UOp:
    """A lifted constant's read, as `scaled` broadcasts it: its one-element buffer as a scalar."""
    return UOp(Ops.EXPAND, dt, (UOp(Ops.RESHAPE, dt, (UOp(Ops.RESHAPE, dt, (g(slot, 1, dt),), ()),), (1,)),), (4,))


@pytest.fixture(autouse=True)
def fresh():
    forget_compiled()   # no family seen yet: what a new process starts from
    yield


# ---- the pass on tiny kernels (no device) ----
def test_a_kernel_keeps_its_literals_until_its_family_comes_back_with_other_values():
    first, again, other = scaled(2.5, 0.75), scaled(2.5, 0.75), scaled(3.5, 0.75)
    assert choose(first) == (first, ())
    assert choose(again) == (first, ())   # (the same kernel: hash-consed)
    x = UOp(Ops.RESHAPE, dtypes.float32, (g(1, 4),), (4,))
    c = UOp(Ops.EXPAND, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (UOp.const(dtypes.float32, 0.75),), (1,)),),
            (4,))
    lifted = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, 4), UOp(Ops.MUL, dtypes.float32, (
        UOp(Ops.MUL, dtypes.float32, (x, argument(2))), c)))),))
    # only the constant that differed is an argument, in the slot after the kernel's own; 0.75 stays a literal
    assert choose(other) == (lifted, (UOp.const(dtypes.float32, 3.5),))
    # from then on, every value of that constant is the same code, and so is the first kernel of the family seen anew
    assert choose(scaled(-4.0, 0.75)) == (lifted, (UOp.const(dtypes.float32, -4.0),))


def test_a_kernel_reading_a_buffer_where_another_has_a_constant_is_not_of_its_family():
    # `(x * 2.5) * 0.75` lifted whole reads slots 2 and 3 where `(x * b) * 0.75`, with b a buffer in slot 2, lifted
    # whole reads b and slot 3: one graph, but one kernel has two constants and the other one (a fixed point's
    # Newton step beside its second derivative gave the two; zip() of their values failed)
    two = scaled(2.5, 0.75)
    y = UOp(Ops.MUL, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (g(1, 4),), (4,)), argument(2)))
    c = UOp(Ops.EXPAND, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (UOp.const(dtypes.float32, 0.75),), (1,)),),
            (4,))
    one = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, 4), UOp(Ops.MUL, dtypes.float32, (y, c)))),))
    assert lift(two, float_uses(two), range(2)) == lift(one, float_uses(one), range(1))
    assert choose(two) == (two, ()) and choose(one) == (one, ())
    assert choose(scaled(2.5, 0.5))[1] == (UOp.const(dtypes.float32, 0.5),)   # (two's family is still its own)


def test_each_use_of_a_constant_is_its_own_argument_and_ints_are_never_lifted():
    k = scaled(2.5, 2.5)   # one CONST node, read twice: two uses
    assert [c.arg for _, _, c in float_uses(k)] == [2.5, 2.5]
    assert lift(k, float_uses(k), range(2)) == lift(scaled(2.5, 3.5), float_uses(scaled(2.5, 3.5)), range(2))
    assert float_uses(scaled(3.0, 5.0, dt=dtypes.int32)) == []
    ints = scaled(3, dt=dtypes.int32)
    assert choose(ints) == (ints, ()) and choose(scaled(5, dt=dtypes.int32)) == (scaled(5, dt=dtypes.int32), ())


def test_a_float_that_becomes_zero_or_one_is_an_argument_of_the_same_family():
    """A warm-up from 0 or a temperature through 1.0: the step with 0 or 1 is no kernel of another family (one more
    compile); the constant that stays 1 stays a literal."""
    choose(scaled(0.5, 1.0))
    assert [c.arg for c in choose(scaled(0.0, 1.0))[1]] == [0.0]
    assert [c.arg for c in choose(scaled(1.0, 1.0))[1]] == [1.0]
    assert choose(scaled(1.0, 1.0))[0] == choose(scaled(0.25, 1.0))[0]


def test_a_family_lifts_more_constants_when_another_one_changes_later():
    choose(scaled(2.5, 0.75))
    assert [c.arg for c in choose(scaled(3.5, 0.75))[1]] == [3.5]
    assert [c.arg for c in choose(scaled(3.5, 0.5))[1]] == [3.5, 0.5]
    assert [c.arg for c in choose(scaled(3.5, 0.75))[1]] == [3.5]   # (chosen before: its code stands)


# ---- jitted programs ----
def test_a_new_jit_per_step_over_a_new_float_compiles_twice_then_never():
    """Step 0's kernel has its constant as a literal, step 1's is the same kernel with another constant: it is
    compiled with the constant as an argument, and steps 2-19 compile nothing. Each step's result is numpy's."""
    x = tg.asarray(np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32) / 4)
    compiles = []
    for i in range(20):
        scale = 1.0 + i * 1e-3   # (from 1.0, as a schedule often starts)
        tg.counters.reset()
        a = x.numpy()
        x = tg.jit(lambda a: tnp.tanh(a @ a) * scale)(x)   # noqa: B023 -- called at once: the point of the test
        compiles.append(tg.counters.compile_count)
        np.testing.assert_allclose(x.numpy(), np.tanh(a @ a) * np.float32(scale), rtol=1e-5, atol=1e-6)
    assert compiles == [1, 1] + [0] * 18


def test_a_lifted_constant_gives_the_literal_kernels_bits():
    """The kernel with its constant an argument computes what the kernel with it written in computes, bit for bit:
    the constant is no value to fold for LLVM (no fast-math), and division by one stays a division (numpy's
    rounding)."""
    x = tg.asarray(np.random.default_rng(1).standard_normal((8, 33)).astype(np.float32))
    y = tg.asarray(np.random.default_rng(2).standard_normal((8, 33)).astype(np.float32))

    def step(c):
        return tg.jit(lambda a, b: (a * c + b, a / c, tnp.exp(a - c).sum(axis=1)))(x, y)
    step(0.3)
    lifted = [r.numpy() for r in step(0.7)]
    tg.counters.reset()
    step(0.9)
    assert tg.counters.compile_count == 0   # (0.7's kernels read their constant: 0.9's are the same code)
    forget_compiled()
    literal = [r.numpy() for r in step(0.7)]   # the first of its family again: its literals written in
    for a, b in zip(lifted, literal, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(lifted[1], x.numpy() / np.float32(0.7))


def test_a_program_with_a_fixed_constant_keeps_its_literal_and_compiles_once():
    x = tg.asarray(np.ones((4, 8), np.float32))
    tg.counters.reset()
    for _ in range(5):   # a new jit each step, the same float: the same kernel
        f = tg.jit(lambda a: a * 2.5 + 1)
        np.testing.assert_array_equal(f(x).numpy(), np.full((4, 8), 3.5, np.float32))
    assert tg.counters.compile_count == 1
    prog = next(iter(f._cache.values()))[0]
    (ast,) = [c.src[0] for c in prog.calls if c.src[0].op is Ops.SINK]
    ck = lower_kernel(choose(ast)[0])
    assert ck.nbufs == 2 and "0x4004000000000000" in ck.src   # 2.5, written into the code


def test_a_schedule_over_several_kernels_and_dtypes():
    """An SGD step with a decaying learning rate and a weight decay that changes too, over float32 and float16
    parameters: per kernel two compiles, then none; each step's parameters are numpy's."""
    rng = np.random.default_rng(3)
    p32, g32 = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((5, 7)).astype(np.float32)
    p16, g16 = rng.standard_normal(9).astype(np.float16), rng.standard_normal(9).astype(np.float16)
    params, grads = (tg.asarray(p32), tg.asarray(p16)), (tg.asarray(g32), tg.asarray(g16))
    compiles = []
    for i in range(6):
        lr, wd = 0.1 / (1 + i), 1e-3 * (i + 2)

        def update(ps, gs):
            return tuple(p - lr * (gr + wd * p) for p, gr in zip(ps, gs, strict=True))   # noqa: B023 -- (as above)
        tg.counters.reset()
        params = tg.jit(update)(params, grads)
        compiles.append(tg.counters.compile_count)
        p32 = p32 - np.float32(lr) * (g32 + np.float32(wd) * p32)
        p16 = p16 - np.float16(lr) * (g16 + np.float16(wd) * p16)
        np.testing.assert_allclose(params[0].numpy(), p32, rtol=1e-6)
        np.testing.assert_allclose(params[1].numpy().astype(np.float32), p16.astype(np.float32), rtol=2e-3)
    assert compiles[0] == compiles[1] >= 1 and compiles[2:] == [0] * 4


def test_a_loop_kernel_over_a_new_float_each_step():
    """A `fori_loop` of elementwise steps is one kernel written with its loop (index level): its constant is read
    from a buffer too once it changes, and each step's result is numpy's."""
    x = tg.asarray(np.random.default_rng(4).standard_normal((4, 8)).astype(np.float32))
    compiles = []
    for c in (0.25, 0.5, 0.75, 0.625):
        tg.counters.reset()
        out = tg.jit(lambda x: tg.lax.fori_loop(0, 10, lambda i, v: v * c + 1.0, x))(x)   # noqa: B023 -- (as above)
        compiles.append(tg.counters.compile_count)
        ref = x.numpy()
        for _ in range(10):
            ref = ref * np.float32(c) + np.float32(1)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)
    assert compiles[0] == compiles[1] >= 1 and compiles[2:] == [0, 0]
