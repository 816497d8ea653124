"""constants: the scalar constants of an eager graph become kernel arguments.

An eager `x * lr` with a new `lr` every step, `fold_in(key, i)` with a step counter, a temperature: with the value
baked into the kernel, every value is a new schedule and a new compile. Here each such CONST is replaced by a view
of a one-element buffer holding the value, so the graph, its schedule and its kernels are the same for every value
(JAX compiles its eager ops per shape and dtype, never per value). The buffers are interned by value in a bounded
pool, so a loop with fixed constants copies nothing per step.

Left as constants: 0 and 1 (the values folding needs: `where(m, x, 0)`, `x * 1`, zero-initialised buffers; a user
value that is 0 or 1 costs at most one more compile), booleans, literals (`Tensor.literal`: the constants of an
algorithm, such as a hash's rotations), and every constant of a graph that spans several devices (an argument
buffer lives on one device). A scalar constant that is itself a result becomes a view of its interned buffer, with
no kernel at all: interned buffers are never written (jit does not donate them). The starts of an eager graph's
dynamic views (`x[i]`, `x[i:i+k]`, `.at[i]`: DYNAMIC_SHRINK, DYNAMIC_PAD) are arguments whatever their value.
`jit` never uses this step: constants of a traced function are literals of its program, as in JAX; its scalar
arguments are inputs. (A jitted kernel that comes back with other float constants, a jit made anew each step around a
new Python float, reads them from buffers too, kernel by kernel: `tgfx/lowering/lifted.py`.)
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from tgfx import forksafe
from tgfx.devices import get_device
from tgfx.dtypes import DType, dtypes, f32_to_bf16
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.execute import buffer_memory
from tgfx.lowering.inline import substitute_outside_calls, walk
from tgfx.lowering.layout import new_buffer

POOL_SIZE = 4096   # interned argument buffers kept; a schedule of ever new values evicts the oldest
_pool: OrderedDict[tuple, UOp] = OrderedDict()
_interned: set[UOp] = set()   # the pool's buffers, for `is_interned`
_pool_lock = forksafe.lock()


def is_runtime_constant(u: UOp) -> bool:
    """A CONST whose value may be a kernel argument instead of a literal."""
    return u.op is Ops.CONST and u.tag is None and u.dtype is not None and (u.dtype.is_float or u.dtype.is_int) \
        and u.arg not in (0, 1)


def scalar_host(dtype: DType, value: int | float) -> np.ndarray:
    """`value` as a one-element host array laid out as `dtype` in memory (bfloat16: its bits, as uint16)."""
    if dtype == dtypes.bfloat16:
        return f32_to_bf16(np.array([value], dtype=np.float32))
    return np.array([value], dtype=dtype.np)


def const_buffer(dtype: DType, value: int | float, device: str, use: int = 0) -> UOp:
    """The interned one-element BUFFER holding `value` for the `use`-th constant of a graph; never written after it
    is filled, so it may be shared. Uses are numbered so that two uses of one value are still two arguments: the
    graph's shape must not depend on which values happen to be equal."""
    key = (dtype, repr(value), device, use)   # repr: -0.0 and 0.0 are different arguments, nan is one
    with _pool_lock:
        buf = _pool.get(key)
        if buf is not None:
            _pool.move_to_end(key)
            return buf
    buf = new_buffer(device, 1, dtype)
    get_device(device).allocator.fill(buffer_memory(buf), scalar_host(dtype, value))
    with _pool_lock:
        _pool[key] = buf
        _interned.add(buf)
        while len(_pool) > POOL_SIZE:
            _interned.discard(_pool.popitem(last=False)[1])
    return buf


def is_interned(buf: UOp) -> bool:
    """Whether BUFFER `buf` is an interned argument buffer (shared: it must never be written)."""
    return buf in _interned


def graph_device(nodes: list[UOp]) -> str | None:
    """The one device a graph computes on (the default device for a graph of constants), or None for several."""
    from tgfx.lowering.schedule import DEFAULT_DEVICE
    devices = {u.arg[1] for u in nodes if u.op is Ops.BUFFER}
    devices |= {u.arg if isinstance(u.arg, str) else None for u in nodes if u.op is Ops.COPY}
    if len(devices) > 1 or None in devices:
        return None
    return next(iter(devices), DEFAULT_DEVICE)


def view_chain(u: UOp) -> tuple[list[UOp], UOp]:
    """The movement ops `u` is made of (outermost first) and what they view."""
    chain = []
    while u.op in GroupOp.Movement:
        chain.append(u)
        u = u.src[0]
    return chain, u


def const_view(u: UOp, offset: bool = False) -> tuple[list[UOp], UOp] | None:
    """`u` as movement ops over a runtime constant (outermost first) and that constant, or None. An `offset` (the
    start of a dynamic view) is a runtime constant whatever its value: `x[0]` and `x[1]` are one schedule too."""
    chain, u = view_chain(u)
    return (chain, u) if is_lifted(u, offset) else None


def is_lifted(c: UOp, offset: bool = False) -> bool:
    """Whether `c`, what a view views, is a constant that becomes an argument: a runtime constant, or any int
    constant when it is an `offset`."""
    if offset:
        return c.op is Ops.CONST and c.tag is None and c.dtype.is_int
    return is_runtime_constant(c)


def strip_literals(sink: UOp) -> UOp:
    """`sink` with its literals (`Tensor.literal`) plain CONSTs, as every later stage expects them."""
    literals = {u: u.replace(tag=None) for u in walk(sink) if u.op is Ops.CONST and u.tag is not None}
    return substitute_outside_calls(sink, literals) if literals else sink
