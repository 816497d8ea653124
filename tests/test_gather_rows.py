"""Rows gathered whole (`emb[tok]`: an embedding's rows for a step's tokens) in a kernel too small for LLVM's loop
vectoriser: each row is copied as vectors of the target's lanes, not element by element (a GRU's scan step gathered
32 rows of 128 floats in 2.3 us, 0.2 as vectors); a larger gather, split over cores, is left to the vectoriser."""
from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import index_kernels, opt_kinds
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.devices.target import target_for
from tgfx.ir.uop import UOp
from tgfx.lowering import render_kernel
from tgfx.lowering.heuristics import hand_coded_opts
from tgfx.lowering.optimize import apply_hand_coded


def _gather_kernel(vocab: int, width: int, tokens: int) -> UOp:
    emb = tg.asarray(np.zeros((vocab, width), np.float32))
    tok = tg.asarray(np.zeros(tokens, np.int32))
    (kernel,) = index_kernels(emb[tok])
    return kernel


@pytest.mark.parametrize("cpu,lanes", [("znver4", 16), ("haswell", 8)])
def test_a_small_gather_of_rows_copies_each_row_as_vectors(cpu: str, lanes: int) -> None:
    sink = _gather_kernel(30, 128, 32)
    target = target_for(cpu).with_cores(1)
    assert opt_kinds(hand_coded_opts(sink, target), sink) == [("UPCAST", "loop", lanes)]
    with tg.config.Context(TGFX_CPU=cpu):
        out, applied = apply_hand_coded(sink, target)
        ir, _, _ = render_kernel("k", out, applied, target)
    assert re.search(rf"load <{lanes} x float>", ir) and re.search(rf"store <{lanes} x float>", ir)


def test_a_gather_split_over_cores_is_left_to_the_loop_vectoriser() -> None:
    sink = _gather_kernel(1000, 768, 512)
    opts = hand_coded_opts(sink, target_for("znver4").with_cores(2))
    assert [o.op for o in opts] == ["THREAD"]


@settings(max_examples=25)
@given(st.integers(1, 40), st.sampled_from([8, 16, 24, 48, 128]), st.integers(1, 64), st.integers(0, 2**31 - 1))
def test_gathered_rows_match_numpy(vocab: int, width: int, tokens: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((vocab, width)).astype(np.float32)
    tok = rng.integers(-vocab, vocab, tokens).astype(np.int32)   # negative rows count from the end
    got = tg.jit(lambda e, t: (e[t], tnp.take(e, t, axis=0, mode="clip") * 2))(tg.asarray(emb), tg.asarray(tok))
    np.testing.assert_array_equal(got[0].numpy(), emb[tok])
    np.testing.assert_array_equal(got[1].numpy(), np.take(emb, tok, axis=0, mode="clip") * 2)   # (negatives: 0)
