"""Where half-precision values are stored (`fusion.find_realizes`): a reduce read only through its rounding to
bfloat16/float16 (a half matmul's result, summed in float32 and rounded once, as JAX's) is stored rounded, the rounding
the reduce kernel's epilogue. Counted on the CPU's schedule (a GPU's contractions round and stage their own: `-p
tests.emulated_cuda` makes CUDA:0 the default), never timed; values against numpy's float32 ones rounded to the half
type after each op."""
from __future__ import annotations

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import DType, bf16_to_f32, dtypes, f32_to_bf16
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.inline import inline
from tgfx.lowering.schedule import schedule


def _stored(out: tg.Tensor) -> list[DType]:
    """The dtype each kernel of `out`'s schedule stores, in order."""
    linear, _ = schedule(list(inline(UOp(Ops.SINK, None, (out.uop,))).src))
    return [c.src[1].dtype for c in linear.src]


def _round(x: np.ndarray, d: DType) -> np.ndarray:
    return bf16_to_f32(f32_to_bf16(x)) if d == dtypes.bfloat16 else x.astype(np.float16).astype(np.float32)


def _heads(x: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
    """A projection split into 4 heads, and the heads' scores."""
    q = (x @ w).reshape(8, 32, 4, 16).transpose(0, 2, 1, 3)
    return q @ q.swapaxes(-1, -2)


@pytest.mark.parametrize("d", [dtypes.bfloat16, dtypes.float16], ids=str)
def test_a_half_matmul_read_only_rounded_is_stored_rounded(d: DType) -> None:
    """The projection's sums are rounded in its kernel and stored in the half type: two kernels. Before, they were
    stored as float32 sums, rounded by a kernel of its own (the scores read them as a matmul operand, where the
    rounding is too costly to do per use) into a float32 copy, then copied into the heads' layout: four kernels, two of
    them float32 copies."""
    rng = np.random.default_rng(0)
    x32, w32 = (_round(rng.standard_normal(s).astype(np.float32), d) for s in ((8, 32, 64), (64, 64)))
    x, w = (tg.asarray(a, device="CPU").astype(d).realize() for a in (x32, w32))
    assert _stored(_heads(x, w)) == [d, d]
    q = _round(x32 @ w32, d).reshape(8, 32, 4, 16).transpose(0, 2, 1, 3)
    want = _round(q @ q.swapaxes(-1, -2), d)
    got = tg.jit(_heads)(x, w).astype(tnp.float32).numpy()
    np.testing.assert_allclose(got, want, rtol=2**-7, atol=1e-6)   # (sums in another order: a half ulp apart at most)


def test_a_sum_also_read_unrounded_is_stored_as_summed() -> None:
    """A float32 matmul read both rounded (a bfloat16 matmul's operand) and as it is (its sum) keeps its float32 store:
    its rounding is not all that reads it."""
    rng = np.random.default_rng(1)
    x, w = (tg.asarray(rng.standard_normal(s).astype(np.float32), device="CPU").realize()
            for s in ((64, 32), (32, 48)))
    a = x @ w
    stored = _stored(a.astype(tnp.bfloat16) @ w.T.astype(tnp.bfloat16) + a.sum())
    assert stored[0] == dtypes.float32
