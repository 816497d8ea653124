"""Custom kernels: write a kernel directly in UOps (ranges, index, load, store) and call it on Tensors.

A kernel is built by a Python function that receives one `DEFINE_GLOBAL` per buffer (outputs first, then inputs;
each a flat array of its Tensor's elements in row-major order) and returns a `SINK` of stores. It runs as written:
no rangeify, the same symbolic simplification, linearizer, LLVM renderer and runtime as every other kernel.
The call is an opaque `CALL` node; give `grad_fxn` to make it differentiable.

Worked example, a fused row-wise softmax (one kernel; the row's max and sum are computed once per row):

>>> import numpy as np, tgfx as tg
>>> from tgfx.kernel import custom_kernel, krange, load, store, sink, reduce
>>> def softmax_rows(out, x, rows=4, cols=8):
...     r, c1, c2, c3 = krange(rows, 0), krange(cols, 1, "reduce"), krange(cols, 2, "reduce"), krange(cols, 3)
...     m = reduce(load(x, r * cols + c1), c1, "max")
...     e = lambda c: (load(x, r * cols + c) - m).alu(tg.Ops.EXP)
...     return sink(store(out, r * cols + c3, e(c3).alu(tg.Ops.FDIV, reduce(e(c2), c2, "add"))))
>>> x = tg.asarray(np.random.rand(4, 8).astype(np.float32))
>>> y = custom_kernel(softmax_rows, x, outputs=[((4, 8), tg.dtypes.float32)], name="softmax_rows")
>>> bool(np.allclose(y.numpy().sum(axis=1), 1.0, atol=1e-6))
True
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tgfx.devices import DEFAULT_DEVICE
from tgfx.dtypes import DType, dtypes, to_dtype
from tgfx.function import Backward
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp, prod
from tgfx.tensor import Tensor, to_tensor
from tgfx.tree import tree_structure

_REDUCE_OPS = {"add": Ops.ADD, "mul": Ops.MUL, "max": Ops.MAX}


def krange(n: int, rid: int, kind: str = "loop") -> UOp:
    """A loop index 0..n-1. `rid` orders loops (outer first) and must be unique in the kernel."""
    return UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, n),), (rid, kind))


def load(buf: UOp, idx: UOp) -> UOp:
    return UOp(Ops.LOAD, buf.dtype, (UOp(Ops.INDEX, buf.dtype, (buf, idx)),))


def store(buf: UOp, idx: UOp, value: UOp) -> UOp:
    if value.dtype != buf.dtype:
        raise TypeError(f"store of a {value.dtype.name} value into a {buf.dtype.name} buffer; cast it first")
    return UOp(Ops.STORE, None, (UOp(Ops.INDEX, buf.dtype, (buf, idx)), value))


def reduce(value: UOp, rngs: UOp | Sequence[UOp], op: str = "add") -> UOp:
    """Reduce `value` over the given ranges (closing them)."""
    rngs = (rngs,) if isinstance(rngs, UOp) else tuple(rngs)
    return UOp(Ops.REDUCE, value.dtype, (value, *rngs), _REDUCE_OPS[op])


def sink(*stores: UOp, name: str | None = None) -> UOp:
    return UOp(Ops.SINK, None, tuple(stores), name)


def custom_kernel(build: Callable[..., UOp], *inputs: Any, outputs: Sequence[tuple[Sequence[int], DType | str]],
                  name: str | None = None, grad_fxn: Callable | None = None) -> Any:
    """Run the kernel `build` makes on `inputs`; returns one Tensor per entry of `outputs` ((shape, dtype) pairs).

    grad_fxn(grad_outputs, call) -> gradients of the inputs, for `tg.grad` through the call; `grad_outputs` is a
    Tensor for one output, a tuple for several (as the call returns them).
    """
    ins = [to_tensor(x) for x in inputs]
    outs = [(tuple(int(s) for s in shape), to_dtype(dt)) for shape, dt in outputs]
    if not outs:
        raise ValueError("custom_kernel needs at least one output (shape, dtype)")
    devices = {t.device for t in ins}
    if len(devices) > 1:
        raise ValueError(f"custom_kernel inputs are on different devices {sorted(devices)}; move them to one")
    device = devices.pop() if devices else DEFAULT_DEVICE
    globals_ = [UOp(Ops.DEFINE_GLOBAL, d, (), (i, prod(s))) for i, (s, d) in enumerate(outs)]
    globals_ += [UOp(Ops.DEFINE_GLOBAL, t.dtype, (), (len(outs) + i, t.size)) for i, t in enumerate(ins)]
    kname = name or getattr(build, "__name__", "custom")
    ast = build(*globals_)
    if not isinstance(ast, UOp) or ast.op is not Ops.SINK or not all(
            s.op is Ops.STORE and s.src[0].op is Ops.INDEX for s in ast.src):
        raise TypeError(f"custom kernel {kname}: the builder must return sink(store(...), ...), got {ast!r:.80}")
    ast = ast.replace(arg=kname)
    spec = tuple((s, d, device) for s, d in outs)
    # the backward gets its gradients as the call returns its results: one Tensor, or a tuple of them
    structure = tree_structure(0 if len(outs) == 1 else (0,) * len(outs))
    backward = None if grad_fxn is None else Backward(grad_fxn, structure)
    call = UOp(Ops.CALL, None, (ast, *(t.uop for t in ins)), (kname, backward, spec))
    res = [Tensor(UOp(Ops.GETTUPLE, d, (call,), i)) for i, (_, d) in enumerate(outs)]
    return res[0] if len(res) == 1 else tuple(res)
