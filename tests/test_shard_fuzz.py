"""Random programs on a Tensor sharded over two CPU devices (along rows or columns) against the same program on one
device: reductions across the sharded axis become all-reduces, elementwise work stays per device, and gradients
flow back through both. Values and gradients must agree."""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from helpers import build_program, program_trees
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp

DEVICES = ("CPU:0", "CPU:1")
_UNARY: dict[str, Callable[[tg.Tensor], tg.Tensor]] = {
    "sin": tnp.sin, "tanh": tnp.tanh, "sq": lambda a: a * a,
    "row_sum": lambda a: a * a.sum(axis=1, keepdims=True) * 0.1,
    "col_mean": lambda a: a - a.mean(axis=0, keepdims=True),
    "row_softmax": lambda a: tnp.exp(a - a.max(axis=1, keepdims=True)) / tnp.exp(a - a.max(axis=1, keepdims=True)).sum(
        axis=1, keepdims=True),
    "col_norm": lambda a: a / tnp.sqrt((a * a).sum(axis=0, keepdims=True) + 1.0),
    "total": lambda a: a - a.mean(),
    "abs": tnp.abs,
}
_BINARY: dict[str, Callable[[tg.Tensor, tg.Tensor], tg.Tensor]] = {
    "add": lambda a, b: a + b, "mul": lambda a, b: a * b, "max": tnp.maximum,
    "where": lambda a, b: tnp.where(a > b, a, b * 0.5),
}
_PROGRAMS = program_trees(_UNARY, _BINARY, max_leaves=4)
_build = functools.partial(build_program, unary=_UNARY, binary=_BINARY)


@settings(max_examples=12)
@given(tree=_PROGRAMS, seed=st.integers(0, 2**16), axis=st.sampled_from([0, 1]))
@example(tree=("row_softmax", ("col_norm", ("x",))), seed=1, axis=0)
@example(tree=("mul", ("total", ("x",)), ("row_sum", ("abs", ("x",)))), seed=2, axis=1)
def test_random_programs_on_a_sharded_input_match_one_device(tree: tuple, seed: int, axis: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    w = rng.standard_normal((4, 6)).astype(np.float32)

    def loss(v: tg.Tensor, weights: tg.Tensor) -> tg.Tensor:
        return (_build(tree, v) * weights).sum()
    one = tg.asarray(x)
    sharded = tg.shard(tg.asarray(x), DEVICES, axis=axis)
    weights = tg.asarray(w)
    np.testing.assert_allclose(_build(tree, sharded).numpy(), _build(tree, one).numpy(), rtol=1e-5, atol=1e-5,
                               err_msg=f"{tree} sharded along {axis}")
    got = tg.jit(tg.grad(loss))(sharded, tg.shard(weights, DEVICES, axis=axis)).numpy()
    np.testing.assert_allclose(got, tg.grad(loss)(one, weights).numpy(), rtol=1e-4, atol=1e-5,
                               err_msg=f"{tree} gradient, sharded along {axis}")
