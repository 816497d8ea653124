"""Weak types and the promotion of a Tensor op's operands (JAX's): which Tensors are weakly typed, the dtype two
operands compute in, and the eager fast path of a Tensor with a Python scalar. Split from `tgfx/tensor.py`, which
imports these names last (they build on Tensor) and re-exports them."""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tgfx.dtypes import (
    _INT_BOUNDS,
    DType,
    dtypes,
    is_python_scalar,
    promote_types,
    promote_weak,
    scalar_kind,
    to_inexact,
)
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.tensor import ArrayLike, Tensor, _expand_uop, _scalar_broadcast, _scalar_operand, broadcast_shapes

# weakly typed Tensors (by id; Tensor's == is numpy's), as JAX's weak_type: a Python scalar made a Tensor
# (`asarray(2.0)`, a jitted function's argument), what elementwise ops compute from such values alone (or from a bool
# or integer Tensor and a Python float: their promotion is a weak kind), and views of them. Like a Python scalar, it
# takes the type of the other operand; `astype` and reductions give strongly typed results.
_weak: dict[int, weakref.ref] = {}


def _register(table: dict[int, weakref.ref], t: Tensor) -> None:
    """`t` in a table of Tensors by id, until it dies: the entry's reference pops it then, in C (a
    WeakValueDictionary made a Python object and ran a Python callback per entry: a tenth of an eager op)."""
    key = id(t)
    table[key] = weakref.ref(t, functools.partial(table.pop, key))   # (called with the ref: pop's default)


def weak(t: Tensor) -> Tensor:
    """Mark `t` weakly typed (JAX's weak_type); returns it."""
    _register(_weak, t)
    return t


def weak_like(ts: Sequence[Tensor], flags: Sequence[bool]) -> list[Tensor]:
    """`ts` marked weakly typed where `flags` say (a trace's weak inputs or outputs, the values a stand-in replaces)."""
    return [weak(t) if w else t for t, w in zip(ts, flags, strict=True)]


def _is_weak_tensor(t: Tensor) -> bool:
    return (r := _weak.get(id(t))) is not None and r() is t


def cast_keeping_weak(x: Tensor, d: DType) -> Tensor:
    """x as `d` for a function that computes in `d` (a float function of an integer), weakly typed when x is, as
    JAX's promotion converts (`jnp.sqrt(4)` is a weak float32); a user's `astype` makes a strongly typed Tensor."""
    out = x.cast(d)
    return weak(out) if out is not x and _is_weak_tensor(x) else out


def keep_weak(out: Any, *operands: ArrayLike) -> Any:
    """`out` (a Tensor, or a tuple of them) weakly typed when the JAX promotion of `operands` is, as the result of
    JAX's elementwise functions is (they promote their operands keeping weak_type, then compute with lax ops that keep
    it): for a function built from ops that type their results strongly (bit casts, constants, casts). A Tensor is
    marked anew, never `out` itself, which may be an operand or a constant another holds."""
    if isinstance(out, tuple):
        return tuple(keep_weak(o, *operands) for o in out)
    if _is_weak_tensor(out) or not any(map(is_weak, operands)) or not promote_weak(*map(promotion_kind, operands))[1]:
        return out
    return weak(Tensor(out.uop))


def weak_typed(fn: Callable) -> Callable:
    """`fn`, an elementwise function of array operands only, with its result weakly typed as `keep_weak` says."""
    @functools.wraps(fn)
    def wrapped(*args: ArrayLike, **kwargs: ArrayLike) -> Any:
        return keep_weak(fn(*args, **kwargs), *args, *kwargs.values())
    return wrapped


def weak_input(x: Any) -> bool:
    """Whether a conversion of `x` without a dtype (`asarray(x)`, `full(shape, x)`) is weakly typed, as in JAX: a
    Python int, float or complex (not a bool), or a weakly typed Tensor."""
    return _is_weak_tensor(x) if isinstance(x, Tensor) else is_python_scalar(x) and not isinstance(x, bool)


def is_weak(x: Any) -> bool:
    """A Python scalar (not a numpy one), or a weakly typed Tensor."""
    return is_python_scalar(x) if not isinstance(x, Tensor) else _is_weak_tensor(x)


def promotion_kind(x: ArrayLike) -> DType | str:
    """What an operand brings to JAX's promotion: a Tensor's dtype (a weak Tensor's weak kind, "f*" or "i*"), a
    Python scalar's weak kind, a numpy scalar's or host data's dtype."""
    if isinstance(x, Tensor):
        if not _is_weak_tensor(x) or x.dtype.is_bool:   # (a weak bool, a comparison of weak values, is a bool)
            return x.dtype
        return "f*" if x.dtype.is_float else "c*" if x.dtype.is_complex else "i*"
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return scalar_kind(x)
    return Tensor(x).dtype


def promote(a: ArrayLike, b: ArrayLike, name: str, float_only: bool = False) -> tuple[Tensor, Tensor]:
    """Both operands as Tensors of their JAX result type (Python scalars and weak Tensors are weakly typed)."""
    if type(a) is Tensor and type(b) is Tensor and a.dtype == b.dtype and (not float_only or a.dtype.is_float) and \
            (_is_weak_tensor(a) == _is_weak_tensor(b)) and (not _is_weak_tensor(a) or _default_of_kind(a.dtype)):
        return a, b   # the common case once one side was promoted (both weak: the default type): nothing to do
    if type(a) is Tensor and (type(b) is float or type(b) is int) or \
            type(b) is Tensor and (type(a) is float or type(a) is int):
        t, x = (a, b) if type(a) is Tensor else (b, a)
        if not _is_weak_tensor(t):
            # a strongly typed Tensor and a Python scalar (`x * 2`): what the loop below does for them, without its
            # type tests
            d = promote_types(t.dtype, "f*" if type(x) is float else "i*")
            if float_only and not d.is_float:
                d = to_inexact(d)
            # the result is weak where the scalar's kind is above the Tensor's: a float with a bool or an integer, an
            # int with a bool (`int8 x * 2.5` is a weak float32); the Tensor is cast to a new one then
            weak_result = not t.dtype.is_inexact and (type(x) is float or t.dtype.is_bool)
            t, c = t.cast(d), _scalar_operand(x, d, name)
            if weak_result:
                t, c = weak(t), weak(c)
            return (t, c) if type(a) is Tensor else (c, t)
        d = t.dtype
        if _default_of_kind(d) and (d.kind == "f" or type(x) is int):
            # a weak Tensor of its kind's default type and a Python scalar no higher in kind (`asarray(step) - 100`,
            # `asarray(2.5) * 3`): the loop's weak result, both operands weak, without its kinds' lattice
            if float_only and not d.is_float:
                d = to_inexact(d)
            ct, c = t.cast(d), weak(_scalar_operand(x, d, name))
            ct = ct if ct is t else weak(ct)
            return (ct, c) if type(a) is Tensor else (c, ct)
    elif (type(a) is int or type(a) is float) and (type(b) is int or type(b) is float):
        # two Python numbers (`minimum(step, decay_steps)`): both weak constants of their kinds' default type
        d = dtypes.default_float if type(a) is float or type(b) is float else dtypes.default_int
        if float_only and not d.is_float:
            d = to_inexact(d)
        return weak(_scalar_operand(a, d, name)), weak(_scalar_operand(b, d, name))
    kinds = [promotion_kind(a), promotion_kind(b)]
    try:
        d, weak_result = promote_weak(*kinds)
    except (KeyError, TypeError) as e:
        raise TypeError(f"{name}: unsupported operand types {kinds}") from e
    if float_only and not d.is_float:
        d = to_inexact(d)
    out = []
    for x, other in ((a, b), (b, a)):
        if isinstance(x, Tensor):
            out.append(x.cast(d))
        elif isinstance(x, (bool, int, float, complex)):
            out.append(_scalar_operand(x, d, name))
        else:  # host data goes where the other operand is, as in JAX (an uncommitted array)
            dev = other.uop.device if isinstance(other, Tensor) else None
            out.append(Tensor(x, device=dev).cast(d))
    if weak_result:   # both weakly typed, as JAX's promote_dtypes makes them (a strong operand is cast: a new Tensor)
        out = [t if t is x else weak(t) for t, x in zip(out, (a, b), strict=True)]
    return out[0], out[1]


def fast_binary(op: Ops, x: Any, y: Any, negate: bool = False, kinds: str = "fiu", compare: bool = False) -> \
        Tensor | None:
    """`x op y` (`x op -y` with `negate`) for the operands `fast_operands` takes (`compare`: a bool result), built
    without promotion or broadcasting logic; None for any others (the general path takes those). A quarter to a half
    of a small eager op's time."""
    # (`fast_operands`, inlined: a call less for every eager op)
    tx, ty = type(x), type(y)
    if tx is Tensor:
        xu = x.uop
        d = xu.dtype
        if ty is Tensor:
            yu = y.uop
            if yu.dtype is not d or d.kind not in kinds or (device := xu.device) != yu.device or \
                    (w := _is_weak_tensor(x)) != _is_weak_tensor(y) or w and not _default_of_kind(d):
                return None
            if negate:
                yu = UOp(Ops.NEG, d, (yu,))
            if (shape := xu.shape) != yu.shape:
                try:
                    shape = broadcast_shapes(shape, yu.shape)
                except ValueError:
                    return None
                xu, yu = _expand_uop(xu, shape), _expand_uop(yu, shape)
            u = UOp(op, dtypes.bool if compare else d, (xu, yu))
            # (its shape and device, known here, cached on it as `UOp.shape` and `UOp.device` would compute them: the
            # next op of a chain reads them, three calls each on a new node)
            known = u.__dict__
            known["shape"], known["device"] = shape, device
            out = Tensor(u)
            return weak(out) if w else out
        if not (d.kind == "f" and (ty is float or ty is int) or _int_keeps_type(d, y)) or d.kind not in kinds or \
                (w := _is_weak_tensor(x)) and not _default_of_kind(d):
            return None
        u = UOp(op, dtypes.bool if compare else d, (xu, _scalar_broadcast(y, d, shape := xu.shape, negate)))
        known = u.__dict__   # (as above)
        known["shape"], known["device"] = shape, xu.device
        out = Tensor(u)
        return weak(out) if w else out
    if ty is not Tensor:
        return None
    yu = y.uop
    d = yu.dtype
    if not (d.kind == "f" and (tx is float or tx is int) or _int_keeps_type(d, x)) or d.kind not in kinds or \
            (w := _is_weak_tensor(y)) and not _default_of_kind(d):
        return None
    u = UOp(op, dtypes.bool if compare else d, (_scalar_broadcast(x, d, shape := yu.shape),
                                                UOp(Ops.NEG, d, (yu,)) if negate else yu))
    known = u.__dict__   # (as above)
    known["shape"], known["device"] = shape, yu.device
    out = Tensor(u)
    return weak(out) if w else out


def fast_operands(x: Any, y: Any, negate: bool = False, kinds: str = "fiu") -> tuple[UOp, UOp, DType, bool] | None:
    """The nodes of `x` and `y` (`-y` with `negate`) as the general path promotes and broadcasts them, their dtype
    and whether the result is weakly typed, for the commonest operands: two Tensors of one dtype (of numpy `kinds`)
    and device, both strongly typed or both weak, or a Tensor and a Python scalar it keeps its type with (an int in
    the range of an integer Tensor's type, an int or a float with a float Tensor), the constant broadcast as
    `_expand_uop` does. A weak Tensor must be of its kind's default type (`jnp.asarray(step) - 100`, a schedule's
    arithmetic: the result weak, as both operands were after promotion). None for anything else."""
    tx, ty = type(x), type(y)
    if tx is Tensor:
        xu = x.uop
        d = xu.dtype
        if ty is Tensor:
            yu = y.uop
            if yu.dtype is not d or d.kind not in kinds or xu.device != yu.device or \
                    (w := _is_weak_tensor(x)) != _is_weak_tensor(y) or w and not _default_of_kind(d):
                return None
            if negate:   # (negated before it is broadcast, as `subtract` does)
                yu = UOp(Ops.NEG, d, (yu,))
            if xu.shape != yu.shape:   # broadcast as `broadcast_uops` does (a mismatch: the general path says so)
                try:
                    shape = broadcast_shapes(xu.shape, yu.shape)
                except ValueError:
                    return None
                xu, yu = _expand_uop(xu, shape), _expand_uop(yu, shape)
            return xu, yu, d, w
        if not (d.kind == "f" and (ty is float or ty is int) or _int_keeps_type(d, y)) or d.kind not in kinds or \
                (w := _is_weak_tensor(x)) and not _default_of_kind(d):
            return None
        return xu, _scalar_broadcast(y, d, xu.shape, negate), d, w
    if ty is not Tensor:
        return None
    yu = y.uop
    d = yu.dtype
    if not (d.kind == "f" and (tx is float or tx is int) or _int_keeps_type(d, x)) or d.kind not in kinds or \
            (w := _is_weak_tensor(y)) and not _default_of_kind(d):
        return None
    return _scalar_broadcast(x, d, yu.shape), UOp(Ops.NEG, d, (yu,)) if negate else yu, d, w


def _default_of_kind(d: DType) -> bool:
    """Whether a weakly typed Tensor of dtype `d` is of its kind's default type (int32, float32; 64-bit in the x64
    mode): with a Python scalar that keeps its type (an int in its range, a float with a float) it promotes to a weak
    `d` (both operands weak, so the result is), the graph a strongly typed Tensor's fast path builds."""
    return d is (dtypes.default_float if d.kind == "f" else dtypes.default_int if d.kind == "i" else None)


def _int_keeps_type(d: DType, x: Any) -> bool:
    """Whether Python scalar `x` with a strongly typed integer Tensor of dtype `d` promotes to `d` itself, its value
    exact there: an int in d's range (out of it the general path says what JAX does)."""
    return type(x) is int and (b := _INT_BOUNDS.get(d)) is not None and b[0] <= x <= b[1]
