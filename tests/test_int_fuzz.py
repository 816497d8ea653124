"""Random integer programs against numpy: int32 arithmetic (floor division and remainder of negative values, shifts,
bitwise ops, min/max, abs, comparisons turned back into ints, reductions along rows and columns), fused into the
kernels tgfx makes of them, eagerly and under jit. Integer results must be exact."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
from helpers import build_program, program_trees
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp

Fn = Callable[..., object]

# (tgfx, numpy) pairs; every op keeps values small (|v| < 2^12) so int32 never overflows
_UNARY: dict[str, tuple[Fn, Fn]] = {
    "neg": (lambda a: -a, lambda a: -a),
    "abs": (tnp.abs, np.abs),
    "half": (lambda a: a // 2, lambda a: a // 2),
    "mod7": (lambda a: a % 7, lambda a: a % 7),
    "shr": (lambda a: a >> 1, lambda a: a >> 1),
    "mask": (lambda a: a & 0xFF, lambda a: a & 0xFF),
    "sign": (tnp.sign, np.sign),
    "row_max": (lambda a: a - a.max(axis=1, keepdims=True), lambda a: a - a.max(axis=1, keepdims=True)),
    "col_min": (lambda a: a - a.min(axis=0, keepdims=True), lambda a: a - a.min(axis=0, keepdims=True)),
    "row_sum": (lambda a: a.sum(axis=1, keepdims=True) // 5 + a, lambda a: a.sum(axis=1, keepdims=True) // 5 + a),
    "cumsum": (lambda a: tnp.cumsum(a, axis=1) // 3, lambda a: np.cumsum(a, axis=1) // 3),
    "argmax": (lambda a: a + a.argmax(axis=1, keepdims=True), lambda a: a + a.argmax(axis=1)[:, None]),
    "positive": (lambda a: (a > 0).astype(tnp.int32) * a, lambda a: (a > 0).astype(np.int32) * a),
    "clip": (lambda a: tnp.clip(a, -100, 100), lambda a: np.clip(a, -100, 100)),
}
_BINARY: dict[str, tuple[Fn, Fn]] = {
    "add": (lambda a, b: (a + b) // 2, lambda a, b: (a + b) // 2),
    "sub": (lambda a, b: (a - b) // 2, lambda a, b: (a - b) // 2),
    "floordiv": (lambda a, b: a // (tnp.abs(b) % 5 + 1) - a // -3, lambda a, b: a // (np.abs(b) % 5 + 1) - a // -3),
    "mod": (lambda a, b: a % (b % 9 - 10), lambda a, b: a % (b % 9 - 10)),
    "xor": (lambda a, b: a ^ (b & 0x3F), lambda a, b: a ^ (b & 0x3F)),
    "max": (tnp.maximum, np.maximum),
    "min": (tnp.minimum, np.minimum),
    "where": (lambda a, b: tnp.where(a > b, a, b * 2 // 3), lambda a, b: np.where(a > b, a, b * 2 // 3)),
}


def _side(side: int) -> tuple[dict[str, Fn], dict[str, Fn]]:
    """The unary and binary ops of one side: 0 tgfx's, 1 numpy's."""
    return {k: v[side] for k, v in _UNARY.items()}, {k: v[side] for k, v in _BINARY.items()}


@settings(max_examples=25)
@given(tree=program_trees(_UNARY, _BINARY, max_leaves=5), seed=st.integers(0, 2**16))
def test_random_integer_programs_compute_numpys_values(tree: tuple, seed: int) -> None:
    x = np.random.default_rng(seed).integers(-1000, 1000, (3, 6)).astype(np.int32)
    want = build_program(tree, x, *_side(1))
    got = build_program(tree, tg.asarray(x), *_side(0))
    assert got.dtype == tnp.int32, (tree, got.dtype)
    np.testing.assert_array_equal(got.numpy(), want, err_msg=str(tree))
    np.testing.assert_array_equal(tg.jit(lambda v: build_program(tree, v, *_side(0)))(tg.asarray(x)).numpy(), want,
                                  err_msg=f"{tree} under jit")
