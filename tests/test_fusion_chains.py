"""Chains of elementwise values that several kernels compute (`fusion._shared_limit`): a coupling flow's
`x = kept + (1 - mask) * (x * exp(s) + t)`, each step read by the next step's matmul and by the step after it. A value
was stored only once its own cost reached SHARED_COST, so the k-th step's kernel computed up to five steps before it
again (realnvp's six couplings: 73k, 145k, ... 435k flops a kernel); a value is now stored once what the kernels but
one compute again reaches SHARED_COST."""
from __future__ import annotations

import numpy as np
import pytest

import tgfx.numpy as tnp
from tgfx import tensor
from tgfx.devices.target import host_target
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering import kernel_source
from tgfx.lowering.inline import inline
from tgfx.lowering.schedule import schedule
from tgfx.tensor import Tensor


def _couplings(xp, x, ws, masks):   # noqa: ANN001, ANN202 -- numpy's and tgfx's arrays alike
    for (w1, w2), mask in zip(ws, masks, strict=True):
        kept = x * mask
        s, t = xp.split(xp.maximum(kept @ w1, 0) @ w2, 2, axis=1)   # (a hidden layer 64 wide: matmuls of their own)
        s = xp.tanh(s) * (1 - mask)
        x = kept + (1 - mask) * (x * xp.exp(s) + t)
    return (x * x).sum(-1)


def _case(depth: int) -> tuple[list, list, np.ndarray]:
    rng = np.random.default_rng(depth)
    ws = [(rng.standard_normal(shape) * 0.3).astype(np.float32) for _ in range(depth) for shape in ((2, 64), (64, 4))]
    masks = [np.array([1, 0] if k % 2 == 0 else [0, 1], np.float32) for k in range(depth)]
    x = rng.standard_normal((512, 2)).astype(np.float32)
    return [(ws[2 * k], ws[2 * k + 1]) for k in range(depth)], masks, x


def _elementwise_flops(depth: int) -> list[int]:
    """The flops of each elementwise kernel (no reduce: the matmuls' kernels are the same at every depth)."""
    ws, masks, x = _case(depth)
    out = _couplings(tnp, Tensor(x), [(Tensor(a), Tensor(b)) for a, b in ws], [Tensor(m) for m in masks])
    linear, _ = schedule(list(inline(UOp(Ops.SINK, None, (out.uop,))).src))
    sources = [kernel_source(c.src[0], host_target()) for c in linear.src if c.src[0].op is Ops.SINK]
    return [src.flops for src in sources if src.name.startswith("E_")]


def test_a_chain_of_couplings_computes_each_step_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensor, "LAZY_DEPTH", 1 << 20)   # (the whole graph lazy, as a trace's is)
    shallow, deep = _elementwise_flops(3), _elementwise_flops(8)
    # a kernel computes at most three steps (a step recomputed by k kernels is stored once its cost times k - 1 reaches
    # SHARED_COST): 1.5 times the three-deep chain's costliest kernel, which computes two (before, a value was stored
    # only once its own cost reached SHARED_COST: five steps, 350k flops against 141k)
    assert max(deep) <= 1.6 * max(shallow), (max(shallow), max(deep))
    # in all: 776k flops for eight steps, 1196k before
    assert sum(deep) <= 8 / 3 * sum(shallow) * 1.5, (sum(shallow), sum(deep))


def test_a_chain_of_couplings_computes_numpys_values() -> None:
    ws, masks, x = _case(6)
    got = _couplings(tnp, Tensor(x), [(Tensor(a), Tensor(b)) for a, b in ws], [Tensor(m) for m in masks])
    np.testing.assert_allclose(got.numpy(), _couplings(np, x, ws, masks), rtol=1e-5, atol=1e-6)
