"""loop_kernel: a loop whose body is elementwise becomes ONE kernel, the steps a RANGE inside it.

When every value of the body is computed element by element from the carries (no reduce, no movement that mixes
elements, only broadcasts of scalars; a stacked output one value per element too), element e of the carries
evolves on its own, so the kernel loops over the elements and, inside, over the steps, keeping the carries in
registers (a scanned input is read at step i: slice i of it; a stacked output is written there)::

    for e in range(N):                       # "loop" range (THREAD may split it across cores)
        c_k = init_k[e]                      # a register per carry
        for i in range(length):              # "carry" range: sequential, never reordered or unrolled
            ys_m[i, e] = y_m(i, consts, c)   # the stacked outputs (and with `save`, the carries) of step i
            c_k' = body_k(i, consts, c)      # all new values from the old ones, then all stored
        out_k[e] = c_k

One launch for the whole loop, no copies between steps. In the index-level IR a carry is
`REDUCE(new value, i, arg=("carry", j))`, and the body reads the current carries through placeholders
`DEFINE_ACC(init, i, arg=("carry", j))` (they depend on i, so nothing that reads them is hoisted out of the loop);
the linearizer gives each carry a register (tgfx/lowering/linearize.py).
"""
from __future__ import annotations

from tgfx.dtypes import dtypes
from tgfx.ir.control import INDEX_DTYPE, LoopSpec
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp, prod
from tgfx.lowering.inline import walk


def is_carry(u: UOp) -> bool:
    """A carry's REDUCE or its placeholder in a loop kernel."""
    return isinstance(u.arg, tuple) and len(u.arg) == 2 and u.arg[0] == "carry"


def _elementwise(body: UOp, n: int) -> bool:
    """Whether every value of `body` is elementwise over n elements: size n or 1, movement only reshapes or
    broadcasts of size-1 values. A value the same at every element (a scalar, broadcast in steps of any size, as vmap
    broadcasts a constant: () -> (5,) -> (1, 5) -> (6, 5)) may have any size: it lowers to the scalar."""
    uniform: set[UOp] = set()
    for u in walk(body):
        if u is body:
            continue
        if u.dtype is not None and u.dtype.is_complex:  # complex values are pairs: a scheduled loop's body
            return False                                   # (tgfx/lowering/complex.py), not registers
        if u.op in (Ops.PARAM, Ops.CONST):
            pass
        elif u.op in GroupOp.Elementwise or u.op in (Ops.RESHAPE, Ops.EXPAND):
            if all(s in uniform for s in u.src):
                uniform.add(u)
                continue
            if u.op is Ops.EXPAND and prod(u.src[0].shape) != 1:
                return False
        else:
            return False
        size = prod(u.shape)
        if size == 1:
            uniform.add(u)
        elif size != n:
            return False
    return True


def loop_kernel(loop: UOp, operands: list[UOp]) -> tuple[UOp, list[UOp]] | None:
    """The kernel AST running `loop` in one launch (its outputs in its first slots: the final carries, the stacked
    outputs, with `save` the saved carries) and the input buffers of its other slots; None when the body is not
    elementwise (the loop then runs step by step on the device, tgfx/lowering/control.py)."""
    sp: LoopSpec = loop.arg
    if sp.cond or sp.dynamic or not sp.length:
        return None
    body = loop.src[0]
    consts, init = loop.src[1:1 + sp.n_consts], loop.src[1 + sp.n_consts:1 + sp.n_consts + sp.n_carry]
    if not init or len({c.shape for c in init}) != 1:
        return None
    n = prod(init[0].shape)
    # (a stacked output is stored a slice a step: one value per element, not a value the same at every element)
    if n == 0 or not _elementwise(body, n) or any(prod(y.shape) != n for y in body.src[sp.n_carry:]):
        return None
    k = sp.n_carry
    n_out = len(body.src) + (k if sp.save else 0)   # the carries, the stacked outputs, the saved carries
    bufs: list[UOp] = []                     # the inputs, in slots n_out, n_out + 1, ... (outputs: 0..n_out-1)
    globals_: dict[UOp, UOp] = {}

    def glob(buf: UOp) -> UOp:
        if buf not in globals_:
            globals_[buf] = UOp(Ops.DEFINE_GLOBAL, buf.dtype, (), (n_out + len(bufs), buf.arg[2]))
            bufs.append(buf)
        return globals_[buf]

    e = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, n),), (0, "loop")) if n > 1 else \
        UOp.const(dtypes.index, 0)
    i = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, sp.length),), (1, "carry"))

    def load(buf: UOp, size: int) -> UOp:
        g = glob(buf)
        return UOp(Ops.LOAD, buf.dtype, (UOp(Ops.INDEX, buf.dtype, (g, e if size > 1 else UOp.const(dtypes.index,
                                                                                                        0))),))
    cur = [UOp(Ops.DEFINE_ACC, b.dtype, (load(b, n), i), ("carry", j))
           for j, b in enumerate(operands[sp.n_consts:sp.n_consts + k])]
    step = UOp.const(dtypes.index, sp.length - 1) - i if sp.reverse else i
    params: dict[int, UOp] = {0: step.cast(INDEX_DTYPE)}
    for j, b in enumerate(operands[:sp.n_consts]):
        params[1 + j] = load(b, prod(consts[j].shape))
    for j in range(k):
        params[1 + sp.n_consts + j] = cur[j]
    xs = loop.src[1 + sp.n_consts + k:1 + sp.n_consts + k + sp.n_xs]
    for m, b in enumerate(operands[sp.n_consts + k:sp.n_consts + k + sp.n_xs]):  # slice i: read at step i
        size = prod(xs[m].shape[1:])
        off = step * size + e if size > 1 else step
        params[1 + sp.n_consts + k + m] = UOp(Ops.LOAD, b.dtype, (UOp(Ops.INDEX, b.dtype, (glob(b), off)),))
    lowered: dict[UOp, UOp] = {}
    for u in walk(body):
        if u is body:
            continue
        if u.op is Ops.PARAM:
            lowered[u] = params[u.arg[0]]
        elif u.op is Ops.CONST:
            lowered[u] = u
        elif u.op in (Ops.RESHAPE, Ops.EXPAND):
            lowered[u] = lowered[u.src[0]]
        else:
            lowered[u] = u.replace(src=tuple(lowered[s] for s in u.src))
    stores = []
    for j, r in enumerate(body.src[:k]):
        out = UOp(Ops.DEFINE_GLOBAL, r.dtype, (), (j, n))
        red = UOp(Ops.REDUCE, r.dtype, (lowered[r], i), ("carry", j))
        stores.append(UOp(Ops.STORE, None, (UOp(Ops.INDEX, r.dtype, (out, e)), red)))
    # the stacked outputs (slice `step` of each, every step: stores inside the step range, tgfx/lowering/linearize.py),
    # then with `save` the carries at the start of every step (the backward's residuals)
    per_step = [lowered[y] for y in body.src[k:]] + (cur if sp.save else [])
    for j, v in enumerate(per_step):
        out = UOp(Ops.DEFINE_GLOBAL, v.dtype, (), (k + j, sp.length * n))
        stores.append(UOp(Ops.STORE, None, (UOp(Ops.INDEX, v.dtype, (out, step * n + e if n > 1 else step)), v)))
    return UOp(Ops.SINK, None, tuple(stores), f"loop_{sp.name}"), bufs
