"""The fast path of a `jit` call: its arguments flattened without `tree_flatten` into leaves and a signature
(`flatten_fast`), and the cached program run on their buffers (`replay`), its Python scalars written into buffers of
the program's own (`ScalarArgs`). Anything this does not handle returns False or None, and the call takes the general
path in `tgfx/transforms/jit.py`, which traces, says what is wrong, or computes what this cannot."""
from __future__ import annotations

from typing import Any

import numpy as np

from tgfx._realize import donated_meanwhile, donations, realize
from tgfx.dtypes import DType, cast_scalar, dtypes, max_value, min_value, of_numpy
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp, buffers
from tgfx.lowering.constants import const_buffer
from tgfx.lowering.execute import range_view
from tgfx.lowering.host_args import HostArgs
from tgfx.lowering.layout import buffer_view
from tgfx.lowering.program import Program, ScalarArgs
from tgfx.tensor import Tensor, canonical_device
from tgfx.tensor import _weak as _weak_tensors
from tgfx.tree import flattens_as_tuple, registered_flatten


def weak_dtype(x: int | float, where: str) -> DType:
    """The dtype a Python scalar argument is traced as: weakly typed, so it takes the type of what it meets."""
    if isinstance(x, float):
        return dtypes.default_float
    if not min_value(dtypes.default_int) <= x <= max_value(dtypes.default_int):
        raise OverflowError(f"jit: Python int argument {where} = {x} does not fit {dtypes.default_int.name}; pass it "
                            f"as a Tensor of a wider dtype, or mark it static (static_argnums)")
    return dtypes.default_int


def flatten_fast(x: Any, leaves: list, sig: list) -> bool:
    """Flatten `x` as `tree_flatten` does (dict children in sorted key order) into `leaves`, with its signature in
    `sig`: the structure and each leaf's shape, dtype and device (a Python scalar's type). False when something is
    not one of the kinds this handles (one-device Tensors, numpy arrays, Python ints and floats, None, tuples, lists,
    dicts with sortable keys, registered pytree nodes with hashable aux data); the general path takes those."""
    t = type(x)
    if t is Tensor:   # (a leaf of its own: an argument of the call, as `jit(f)(x)`'s x)
        u = x.uop
        if type(u.device) is not str:   # sharded: its layout belongs to the signature (the general path's)
            return False
        leaves.append(x)
        w = _weak_tensors.get(id(x))   # (`is_weak`, inlined: this runs per argument of every replay)
        sig.append((u.shape, u.dtype, u.device) if w is None or w() is not x else (u.shape, u.dtype, u.device, True))
        return True
    if t is int or t is float:
        leaves.append(x)
        sig.append(t)
        return True
    if t is np.ndarray:   # host data: the same trace as a Tensor's, copied in by `replay` (or made a Tensor now,
        # as the general path does, where its values would be converted: a 64-bit type without x64)
        d = of_numpy(x.dtype) if x.dtype.kind in "biuf" else None
        if d is not None and d.np == x.dtype:
            leaves.append(x)
            sig.append((x.shape, d, canonical_device(None)))
        else:
            x = Tensor(x)
            leaves.append(x)
            sig.append((x.uop.shape, x.uop.dtype, x.uop.device))
        return True
    if x is None:
        sig.append(None)
        return True
    if t is tuple or t is list or isinstance(x, tuple) and flattens_as_tuple(t):   # (an optimizer's state)
        sig.append((t, len(x)))
        children = x
    elif t is dict:
        try:
            keys = sorted(x)
        except TypeError:
            return False
        sig.append((dict, tuple(keys)))
        children = map(x.__getitem__, keys)
    elif (flatten := registered_flatten(t)) is None:
        return False
    else:   # a registered node (JAX's `OptimizerState`, a registered dataclass): its type and aux data in the key
        children, aux = flatten(x)
        try:
            hash(aux)
        except TypeError:   # aux the general path compares by == alone (an unhashable dict)
            return False
        sig.append((t, aux))
    for c in children:   # (a Tensor child taken here, not by a call: most children of a step's trees are Tensors)
        if type(c) is Tensor:
            u = c.uop
            if type(u.device) is not str:
                return False
            leaves.append(c)
            w = _weak_tensors.get(id(c))   # (as for a Tensor `x`, above)
            sig.append((u.shape, u.dtype, u.device) if w is None or w() is not c else
                       (u.shape, u.dtype, u.device, True))
        elif not flatten_fast(c, leaves, sig):
            return False
    return True


_BUFFER, _RESHAPE = Ops.BUFFER, Ops.RESHAPE
BULK_LEAVES = 8   # a call with this many leaves has its Tensors' buffers found in C loops (`replay`)


def replay(prog: Program, leaves: list, host: str) -> list[UOp] | None:
    """The hit path of a fast-path call: `prog` run on the leaves' buffers (a Python scalar's is one of the program's
    buffers for it, `ScalarArgs`, or else the interned buffer of its value, as `_leaf_tensor` gives; both on `host`,
    where the trace put the call's host data; an argument not yet computed is computed first), or None for the
    general path (a program that donates or shards, an int out of range: the general path says so)."""
    donated = donations.count   # (before the Tensors are read: see DonationLog)
    # the buffers of the Tensor leaves (a reshape's: `buffer_view`, inlined) and their memory, in C loops but for one
    # test per leaf (realnvp's 218 parameters and moments: 11,000 bytecodes leaf by leaf, 4,000 so); None where a
    # leaf needs more: a Python scalar, host data, a lazy Tensor, a range of a buffer (the loop below)
    if (n := len(leaves)) >= BULK_LEAVES:
        bufs = [(u if (u := x.uop).op is _BUFFER else s[0] if u.op is _RESHAPE and (s := u.src)[0].op is _BUFFER
                 else None) if type(x) is Tensor else None for x in leaves]
        mems = list(map(buffers.get, map(id, bufs)))
        todo = [i for i, m in enumerate(mems) if m is None] if None in mems else ()
    else:   # (a few leaves: the loop below takes them all, for less than the comprehension's call and maps)
        bufs, mems, todo = [None] * n, [None] * n, range(n)
    taken = []
    try:
        for i in todo:
            x = leaves[i]
            if type(x) is Tensor:
                u = x.uop
                if u.op is _BUFFER:
                    pass
                elif u.op is _RESHAPE and u.src[0].op is _BUFFER:   # (`buffer_view`, inlined)
                    u = u.src[0]
                else:
                    if (v := buffer_view(u)) is None:   # a row of a computed buffer (`key, sub = split(key)`) is
                        if (r := range_view(u)) is None:   # its memory; anything else is computed now
                            _compute_rest(leaves, i)       # (`_compute_rest`)
                            if (v := buffer_view(x.uop)) is None:
                                return None
                        else:
                            x.uop, v = r, buffer_view(r)
                    u = v
            elif type(x) is np.ndarray:   # copied into a buffer of the program's (not one a result is a view of)
                if prog.single is not None and prog.single.device.name == host and i not in prog.returned_inputs:
                    args = _host_args(prog, i, host, x)
                    if (entry := args.take(x)) is not None:
                        taken.append((args, entry))
                        bufs[i], mems[i] = entry.buf, entry.mem
                        continue
                u = buffer_view(Tensor(x).uop)
            else:
                try:
                    d = weak_dtype(x, "")
                except OverflowError:   # the general path names the argument
                    return None
                value = cast_scalar(x, d)
                # a buffer of the program's, written now (not one a result is a view of: that one is handed out)
                if prog.single is not None and prog.single.device.name == host and i not in prog.returned_inputs:
                    args = _scalar_args(prog, i, host)
                    if (entry := args.take(d, value)) is not None:
                        taken.append((args, entry))
                        bufs[i], mems[i] = entry.buf, entry.mem
                        continue
                u = const_buffer(d, value, host)
            if (mem := buffers.get(id(u))) is None:   # (memory_of, inlined)
                return None
            bufs[i], mems[i] = u, mem
        results = prog.execute(mems, bufs)
        if donations.count != donated and donations.since(donated, bufs):
            raise donated_meanwhile("a jitted call")
        return results
    finally:   # the program's scalar buffers this call took: readable until the timeline passes its submission
        for args, entry in taken:
            args.release(entry)


def _compute_rest(leaves: list, start: int) -> None:
    """Compute `leaves[start]` and every later Tensor of `leaves` not yet computed (nor a range of a computed buffer),
    in one schedule, as the general path computes a call's lazy arguments: a batch gathered eagerly every step
    (`x[perm[i:i + b]]`) took that path, and with it each step's learning rate an interned buffer of its own (a new
    one per value, 4,096 kept) instead of the program's (`ScalarArgs`)."""
    lazy = []
    for x in leaves[start:]:
        if type(x) is Tensor and buffer_view(u := x.uop) is None:
            if (r := range_view(u)) is None:
                lazy.append(x)
            else:
                x.uop = r
    realize(*lazy)


def _host_args(prog: Program, i: int, device: str, x: np.ndarray) -> HostArgs:
    """The buffers of `prog`'s numpy argument `i` (`HostArgs`) on `device`, made on first use."""
    args = prog.host_args.get(i)
    return args if args is not None else prog.host_args.setdefault(i, HostArgs(device, x.shape, of_numpy(x.dtype)))


def _scalar_args(prog: Program, i: int, device: str) -> ScalarArgs:
    """The buffers of `prog`'s Python scalar argument `i` (`ScalarArgs`) on `device`, made on first use."""
    args = prog.scalar_args.get(i)
    return args if args is not None else prog.scalar_args.setdefault(i, ScalarArgs(device))
