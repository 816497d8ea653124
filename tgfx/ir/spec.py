"""Type rules of the IR: dtype, shape and device of every op. Checked on every new UOp when `SPEC=1`.

Each rule is a `(UPat, fn)` returning True when the node is well formed; a node no rule accepts fails.
"""
from __future__ import annotations

from tgfx.dtypes import dtypes
from tgfx.ir import blocks
from tgfx.ir.control import INDEX_DTYPE, LoopSpec, SwitchSpec, loop_results, n_results
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.pattern import PatternMatcher, UPat
from tgfx.ir.uop import UOp, prod


class SpecError(TypeError):
    pass


def _same_shapes(*us: UOp) -> bool:
    shapes = {u.shape for u in us if u.shape is not None}
    return len(shapes) <= 1


def _same_device(*us: UOp) -> bool:
    devs = {u.device for u in us if u.device is not None}
    return len(devs) <= 1


def _alu_ok(x: UOp) -> bool:
    srcs = x.src[1:] if x.op is Ops.WHERE else x.src
    if x.op is Ops.WHERE and x.src[0].dtype != dtypes.bool:
        return False
    if x.op in (Ops.SHL, Ops.SHR):
        ok_types = x.src[0].dtype == x.dtype
    else:
        ok_types = all(s.dtype == srcs[0].dtype for s in srcs)
    if x.op in GroupOp.Comparison:
        ok_types = ok_types and x.dtype == dtypes.bool
    elif x.op is not Ops.WHERE:
        ok_types = ok_types and x.dtype == srcs[0].dtype
    if x.op in GroupOp.FloatOnly and not x.dtype.is_inexact:
        return False
    if x.op in GroupOp.IntOnly and x.dtype.is_float:
        return False
    return ok_types and _same_shapes(*x.src) and _same_device(*x.src)


def _reshape_ok(x: UOp) -> bool:
    return x.src[0].shape is None or prod(x.src[0].shape) == prod(x.arg)


def _expand_ok(x: UOp) -> bool:
    s = x.src[0].shape
    return len(s) == len(x.arg) and all(a == b or a == 1 for a, b in zip(s, x.arg, strict=True))


def _permute_ok(x: UOp) -> bool:
    return sorted(x.arg) == list(range(len(x.src[0].shape)))


def _pad_ok(x: UOp) -> bool:
    return len(x.arg) == len(x.src[0].shape) and all(b >= 0 and a >= 0 for b, a in x.arg)


def _shrink_ok(x: UOp) -> bool:
    return len(x.arg) == len(x.src[0].shape) and all(0 <= b <= e <= s for (b, e), s in zip(x.arg, x.src[0].shape,
                                                                                          strict=True))


def _dynamic_view_ok(x: UOp) -> bool:
    """One integer scalar start per axis in arg[0]; the shorter shape fits in the longer one along those axes and
    equals it along the others (a DYNAMIC_SHRINK's output is the shorter, a DYNAMIC_PAD's its source)."""
    axes, shape = x.arg
    inner, outer = (shape, x.src[0].shape) if x.op is Ops.DYNAMIC_SHRINK else (x.src[0].shape, shape)
    if len(x.src) != 1 + len(axes) or len(inner) != len(outer) or list(axes) != sorted(set(axes)):
        return False
    if any(s.shape != () or not s.dtype.is_int for s in x.src[1:]) or x.dtype != x.src[0].dtype:
        return False
    return all(0 <= i <= o if a in axes else i == o for a, (i, o) in enumerate(zip(inner, outer, strict=True)))


def _reduce_ok(x: UOp) -> bool:
    op, axes = x.arg
    return op in GroupOp.Reduce and all(0 <= a < len(x.src[0].shape) for a in axes) and x.dtype == x.src[0].dtype


def _multi_ok(x: UOp) -> bool:
    parts = x.src
    if not parts or any(not isinstance(p.device, str) or p.dtype != x.dtype for p in parts):
        return False
    if len({p.device for p in parts}) != len(parts):
        return False
    axis = x.arg if x.op is Ops.MULTI else None
    if axis is None:
        return _same_shapes(*parts)
    same = all(p.shape == parts[0].shape for p in parts)
    if type(axis) is int:
        return same and 0 <= axis < len(parts[0].shape)
    return same and len(axis) == len(parts[0].shape) and blocks.is_valid(axis, len(parts)) and \
        blocks.canonical(axis, len(parts)) == axis


def result_dtype(call: UOp, i: int) -> object:
    if call.op is Ops.LOOP:
        return loop_results(call)[i][1]
    body = call.src[0]
    return call.arg[2][i][1] if call.op is Ops.CALL and body.op in (Ops.SINK, Ops.CALLBACK) else body.src[i].dtype


def _loop_ok(x: UOp) -> bool:
    """Operand and body types agree: the body maps (index, consts, carries, x slices) to (carries, y slices)."""
    sp = x.arg
    if not isinstance(sp, LoopSpec) or len(x.src) != sp.n_bodies + sp.n_consts + sp.n_carry + sp.n_xs + sp.dynamic:
        return False
    body = x.src[0]
    consts, init, xs, trip = sp.operands(x)
    if body.op is not Ops.TUPLE or len(body.src) < sp.n_carry or any(
            (o.shape, o.dtype) != (c.shape, c.dtype) for o, c in zip(body.src, init, strict=False)):
        return False
    if sp.length is None and (not sp.counted or len(body.src) > sp.n_carry or sp.save or sp.n_xs):
        return False
    if any(not a.shape or a.shape[0] != sp.length for a in xs):
        return False
    if sp.cond and (x.src[1].op is not Ops.TUPLE or len(x.src[1].src) != 1 or x.src[1].src[0].dtype != dtypes.bool or
                    x.src[1].src[0].shape != ()):
        return False
    return trip is None or (trip.dtype == INDEX_DTYPE and trip.shape == ())


def _switch_ok(x: UOp) -> bool:
    sp = x.arg
    if not isinstance(sp, SwitchSpec) or len(x.src) <= sp.n_branches:
        return False
    branches, index = x.src[:sp.n_branches], x.src[sp.n_branches]
    types = [tuple((o.shape, o.dtype) for o in b.src) for b in branches]
    return (all(b.op is Ops.TUPLE for b in branches) and len(set(types)) == 1 and index.dtype == dtypes.int32 and
            index.shape == ())


spec = PatternMatcher([
    (UPat(Ops.CONST, name="x"), lambda x: x.dtype is not None and isinstance(x.arg, (bool, int, float)) or
     x.dtype.is_complex and isinstance(x.arg, complex)),
    (UPat((Ops.BUFFER, Ops.PARAM, Ops.DEFINE_GLOBAL, Ops.IOTA, Ops.VARIABLE, Ops.BIND, Ops.SPECIAL, Ops.DEFINE_ACC,
           Ops.DEFINE_REG, Ops.DEFINE_LOCAL), name="x"),
     lambda x: x.dtype is not None),
    (UPat(Ops.BARRIER, name="x"), lambda x: x.dtype is None and len(x.src) >= 1),
    (UPat(Ops.WMMA, name="x"), lambda x: x.dtype == dtypes.float32 and len(x.src) == 16 and x.arg in range(4) and
     x.src[0].dtype in (dtypes.float16, dtypes.bfloat16) and all(s.dtype == x.src[0].dtype for s in x.src[:12]) and
     all(s.dtype == dtypes.float32 for s in x.src[12:])),
    (UPat(GroupOp.ALU, name="x"), _alu_ok),
    (UPat((Ops.CAST, Ops.BITCAST), name="x"), lambda x: len(x.src) == 1 and (
        x.op is Ops.CAST or x.dtype.itemsize == x.src[0].dtype.itemsize)),
    (UPat(Ops.AS_COMPLEX, name="x"), lambda x: x.dtype.is_complex and x.src[0].dtype == x.dtype.real and
     x.src[0].shape[-1:] == (2,)),
    (UPat(Ops.AS_PAIRS, name="x"), lambda x: x.src[0].dtype.is_complex and x.dtype == x.src[0].dtype.real),
    (UPat(Ops.RESHAPE, name="x"), _reshape_ok),
    (UPat(Ops.EXPAND, name="x"), _expand_ok),
    (UPat(Ops.PERMUTE, name="x"), _permute_ok),
    (UPat(Ops.PAD, name="x"), _pad_ok),
    (UPat(Ops.SHRINK, name="x"), _shrink_ok),
    (UPat(GroupOp.DynamicView, name="x"), _dynamic_view_ok),
    (UPat(Ops.FLIP, name="x"), lambda x: all(0 <= a < len(x.src[0].shape) for a in x.arg)),
    (UPat(Ops.REDUCE_AXIS, name="x"), _reduce_ok),
    (UPat(Ops.FUNCTION, name="x"), lambda x: len(x.src) >= 1 and x.src[0].op is Ops.TUPLE),
    (UPat(Ops.GETTUPLE, name="x"), lambda x: x.src[0].op in (Ops.FUNCTION, Ops.CALL, Ops.LOOP, Ops.SWITCH) and
     0 <= x.arg < n_results(x.src[0]) and x.dtype == result_dtype(x.src[0], x.arg)),
    (UPat(Ops.LOOP, name="x"), _loop_ok),
    (UPat(Ops.SWITCH, name="x"), _switch_ok),
    # a COPY with no source is the schedule's copy command (arg: (bytes, source offset, destination offset), or
    # (bytes, dst stride, src stride, count) for one indexed by a device word)
    (UPat((Ops.CONTIGUOUS, Ops.COPY, Ops.AFTER), name="x"),
     lambda x: x.dtype == x.src[0].dtype if x.src else x.op is Ops.COPY and isinstance(x.arg, tuple) and
     len(x.arg) in (3, 4)),
    # sharded values: one-device parts of one dtype, split evenly along the axis (or equal, replicated)
    (UPat(Ops.MULTI, name="x"), _multi_ok),
    (UPat(Ops.MSELECT, name="x"), lambda x: isinstance(x.src[0].device, tuple) and 0 <= x.arg[0] < len(x.src[0].device)
     and (x.arg[1] is None or x.src[0].shape[x.arg[1]] % len(x.src[0].device) == 0)),
    (UPat(Ops.ALLREDUCE, name="x"), lambda x: x.arg in GroupOp.Reduce and _multi_ok(x)),
    (UPat(Ops.NETWORK, name="x"), lambda x: isinstance(x.arg, tuple) and len(x.arg) == 4 and (
        not x.src and x.dtype is None or len(x.src) == 1 and x.dtype == x.src[0].dtype
        and isinstance(x.src[0].device, str))),
    # kernel-level and structural ops: their shapes are checked by the passes that build them
    (UPat((Ops.BLOCK, Ops.LABEL, Ops.JUMP, Ops.WORD), name="x"), lambda x: not x.src and x.dtype is None),
    (UPat(Ops.CALLBACK, name="x"),   # a host callback: its arg runs it (tgfx/callback.py)
     lambda x: not x.src and x.dtype is None and callable(getattr(x.arg, "program", None))),
    (UPat((Ops.TUPLE, Ops.CALL, Ops.STORE, Ops.LOAD, Ops.INDEX, Ops.RANGE, Ops.END, Ops.REDUCE, Ops.SINK,
           Ops.LINEAR, Ops.MSTACK)),
     lambda: True),
])


def check_uop(u: UOp) -> None:
    ok = spec.rewrite(u)
    if ok is not True:
        srcs = ", ".join(f"{s.op.name}:{s.dtype!r}:{s.shape}" for s in u.src)
        raise SpecError(f"invalid {u.op.name} (dtype {u.dtype!r}, arg {u.arg!r}) with sources [{srcs}]")


# ---- stage invariants: what may remain of a graph after a stage of the pipeline (checked there when SPEC=1) ----
# after rangeify (and the index-level passes): scalar code over explicit loops, no tensor-level op left
_TENSOR_LEVEL = GroupOp.Movement | GroupOp.DynamicView | {
    Ops.REDUCE_AXIS, Ops.PARAM, Ops.FUNCTION, Ops.CALL, Ops.GETTUPLE, Ops.TUPLE, Ops.COPY, Ops.CONTIGUOUS, Ops.MULTI,
    Ops.MSELECT, Ops.MSTACK, Ops.ALLREDUCE, Ops.NETWORK, Ops.BUFFER, Ops.LOOP, Ops.SWITCH, Ops.AS_COMPLEX, Ops.AS_PAIRS}
# a LINEAR's commands: kernels and copies as CALLs, control commands as themselves, each on BUFFER operands
_COMMANDS = frozenset({Ops.SINK, Ops.COPY, Ops.BLOCK, Ops.LABEL, Ops.JUMP, Ops.WORD, Ops.NETWORK, Ops.CALLBACK})
spec_linear = PatternMatcher([
    (UPat(Ops.LINEAR, name="x"), lambda x: all(c.op is Ops.CALL and c.src and c.src[0].op in _COMMANDS
                                               and all(b.op is Ops.BUFFER for b in c.src[1:]) for c in x.src)),
])


def check_stage(root: UOp, stage: str) -> None:
    """Raise SpecError if `root` holds what `stage` ("kernel": an index-level kernel; "linear": a schedule) must
    have lowered away."""
    if stage == "kernel":
        bad = next((u for u in root.toposort() if u.op in _TENSOR_LEVEL), None)
        if bad is not None:
            raise SpecError(f"{bad.op.name} is left in an index-level kernel (after rangeify): {bad.arg!r}")
    elif stage == "linear":
        if spec_linear.rewrite(root) is not True:
            wrong = next((c for c in root.src if c.op is not Ops.CALL or not c.src or c.src[0].op not in _COMMANDS
                          or any(b.op is not Ops.BUFFER for b in c.src[1:])), None)
            raise SpecError(f"invalid LINEAR command {wrong.op.name if wrong else '?'} "
                            f"({wrong.src[0].op.name if wrong is not None and wrong.src else 'no body'})")
    else:
        raise ValueError(f"unknown stage {stage!r}")
