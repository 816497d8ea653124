"""`tgfx.lax`: loops and branches that compile to loops and branches on the device, with JAX's semantics.

The rest of `jax.lax` that programs call lives in modules of its own and is re-exported here: `dynamic_slice`,
`dynamic_update_slice` and their `_in_dim` forms (`_lax_slicing.py`), `conv_general_dilated`, `conv`,
`ConvDimensionNumbers` and `Precision` (`_lax_conv.py`), `reduce_window` (`_lax_window.py`) and the binary
`add`, `mul`, `max`, `min` it reduces with (`_lax_elementwise.py`); the general `gather`, `scatter`,
`scatter_add` (`_mul`, `_min`, `_max`) and `reduce` (`_lax_gather.py`); the `linalg` namespace (`_lax_linalg.py`);
the elementwise primitives, which do not promote dtypes (`sub`, `div`, `exp`, `shift_left`, `eq`, ...,
`_lax_ops.py`); the shape operations, selections and conversions (`broadcast_in_dim`, `slice`, `pad`, `select_n`,
`convert_element_type`, ..., `_lax_shape.py`); the reductions, cumulative reductions, sorts, `top_k`,
`associative_scan`, `map` and `dot_general` (`_lax_scan.py`); and `stop_gradient` (`transforms/grad.py`).
This module is the control flow:

`scan`, `fori_loop` and `while_loop` build one `LOOP` node, `cond` and `switch` one `SWITCH` node
(`tgfx/ir/control.py`). Their functions are traced once into bodies of their own, never unrolled: the body is
scheduled and compiled once, and the device runs it as often as the loop says (a BLOCK of packets with a counter and
a JUMP, `tgfx/lowering/control.py`), so the compile time and the number of compiled kernels do not depend on the
trip count, and no Python runs per step. A branch is picked on the device by the predicate's value: only the chosen
branch runs, eagerly and under `jit` alike.

Values a function reads from outside (closures, globals, an enclosing trace's values) become loop invariants:
computed once, before the loop, and passed in. Everything is differentiable in reverse mode (`grad`, `vjp`) and
forward mode (`jvp`): the backward of a loop is a loop running the other way over the body's VJP, reading the
carries the forward saved at every step (JAX's approach); the backward of a branch is a branch over the branches'
VJPs. `while_loop` is differentiable when it is given `max_steps` (beyond JAX, which cannot differentiate while
loops in reverse mode): the forward saves at most that many carries and the backward runs only over the steps taken.

>>> import tgfx as tg, tgfx.numpy as tnp
>>> tg.lax.fori_loop(0, 1000, lambda i, x: x * 0.5 + 1.0, tnp.zeros(3))           # one compiled loop
>>> total, cums = tg.lax.scan(lambda c, x: (c + x, c + x), 0.0, tnp.arange(5.0))   # 10.0, [0, 1, 3, 6, 10]
>>> tg.lax.cond(x.sum() > 0, lambda x: x * 2, lambda x: -x, x)                     # decided on the device
"""
from __future__ import annotations

import builtins
import itertools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from tgfx import _lax_linalg as linalg  # noqa: F401 - the tg.lax.linalg namespace
from tgfx._lax_conv import ConvDimensionNumbers as ConvDimensionNumbers
from tgfx._lax_conv import Precision as Precision
from tgfx._lax_conv import conv as conv
from tgfx._lax_conv import conv_dimension_numbers as conv_dimension_numbers
from tgfx._lax_conv import conv_general_dilated as conv_general_dilated
from tgfx._lax_conv import conv_with_general_padding as conv_with_general_padding
from tgfx._lax_conv_more import conv_general_dilated_patches as conv_general_dilated_patches
from tgfx._lax_conv_more import conv_general_permutations as conv_general_permutations
from tgfx._lax_conv_more import conv_general_shape_tuple as conv_general_shape_tuple
from tgfx._lax_conv_more import conv_shape_tuple as conv_shape_tuple
from tgfx._lax_conv_more import conv_transpose as conv_transpose
from tgfx._lax_conv_more import conv_transpose_shape_tuple as conv_transpose_shape_tuple
from tgfx._lax_conv_more import reduce_window_shape_tuple as reduce_window_shape_tuple
from tgfx._lax_elementwise import add as add
from tgfx._lax_elementwise import max as max  # noqa: A004 - JAX's name
from tgfx._lax_elementwise import min as min  # noqa: A004 - JAX's name
from tgfx._lax_elementwise import mul as mul
from tgfx._lax_gather import GatherDimensionNumbers as GatherDimensionNumbers
from tgfx._lax_gather import GatherScatterMode as GatherScatterMode
from tgfx._lax_gather import ScatterDimensionNumbers as ScatterDimensionNumbers
from tgfx._lax_gather import gather as gather
from tgfx._lax_gather import reduce as reduce
from tgfx._lax_gather import scatter as scatter
from tgfx._lax_gather import scatter_add as scatter_add
from tgfx._lax_gather import scatter_max as scatter_max
from tgfx._lax_gather import scatter_min as scatter_min
from tgfx._lax_gather import scatter_mul as scatter_mul
from tgfx._lax_more import FftType as FftType
from tgfx._lax_more import approx_max_k as approx_max_k
from tgfx._lax_more import approx_min_k as approx_min_k
from tgfx._lax_more import bessel_i0e as bessel_i0e
from tgfx._lax_more import bessel_i1e as bessel_i1e
from tgfx._lax_more import betainc as betainc
from tgfx._lax_more import broadcast_to_rank as broadcast_to_rank
from tgfx._lax_more import custom_linear_solve as custom_linear_solve
from tgfx._lax_more import custom_root as custom_root
from tgfx._lax_more import empty as empty
from tgfx._lax_more import fft as fft
from tgfx._lax_more import igamma as igamma
from tgfx._lax_more import igamma_grad_a as igamma_grad_a
from tgfx._lax_more import igammac as igammac
from tgfx._lax_more import index_take as index_take
from tgfx._lax_more import mulhi as mulhi
from tgfx._lax_more import optimization_barrier as optimization_barrier
from tgfx._lax_more import platform_dependent as platform_dependent
from tgfx._lax_more import polygamma as polygamma
from tgfx._lax_more import random_gamma_grad as random_gamma_grad
from tgfx._lax_more import reduce_precision as reduce_precision
from tgfx._lax_more import scatter_apply as scatter_apply
from tgfx._lax_more import scatter_sub as scatter_sub
from tgfx._lax_more import split as split
from tgfx._lax_more import stack as stack
from tgfx._lax_more import tile as tile
from tgfx._lax_more import unstack as unstack
from tgfx._lax_more import with_sharding_constraint as with_sharding_constraint
from tgfx._lax_more import zeta as zeta
from tgfx._lax_ops import RoundingMethod as RoundingMethod
from tgfx._lax_ops import abs as abs  # noqa: A004 - JAX's name
from tgfx._lax_ops import acos as acos
from tgfx._lax_ops import acosh as acosh
from tgfx._lax_ops import asin as asin
from tgfx._lax_ops import asinh as asinh
from tgfx._lax_ops import atan as atan
from tgfx._lax_ops import atan2 as atan2
from tgfx._lax_ops import atanh as atanh
from tgfx._lax_ops import bitwise_and as bitwise_and
from tgfx._lax_ops import bitwise_not as bitwise_not
from tgfx._lax_ops import bitwise_or as bitwise_or
from tgfx._lax_ops import bitwise_xor as bitwise_xor
from tgfx._lax_ops import cbrt as cbrt
from tgfx._lax_ops import ceil as ceil
from tgfx._lax_ops import clz as clz
from tgfx._lax_ops import cos as cos
from tgfx._lax_ops import cosh as cosh
from tgfx._lax_ops import digamma as digamma
from tgfx._lax_ops import div as div
from tgfx._lax_ops import eq as eq
from tgfx._lax_ops import erf as erf
from tgfx._lax_ops import erf_inv as erf_inv
from tgfx._lax_ops import erfc as erfc
from tgfx._lax_ops import exp as exp
from tgfx._lax_ops import exp2 as exp2
from tgfx._lax_ops import expm1 as expm1
from tgfx._lax_ops import floor as floor
from tgfx._lax_ops import ge as ge
from tgfx._lax_ops import gt as gt
from tgfx._lax_ops import integer_pow as integer_pow
from tgfx._lax_ops import is_finite as is_finite
from tgfx._lax_ops import le as le
from tgfx._lax_ops import lgamma as lgamma
from tgfx._lax_ops import log as log
from tgfx._lax_ops import log1p as log1p
from tgfx._lax_ops import logistic as logistic
from tgfx._lax_ops import lt as lt
from tgfx._lax_ops import ne as ne
from tgfx._lax_ops import neg as neg
from tgfx._lax_ops import nextafter as nextafter
from tgfx._lax_ops import population_count as population_count
from tgfx._lax_ops import pow as pow  # noqa: A004 - JAX's name
from tgfx._lax_ops import reciprocal as reciprocal
from tgfx._lax_ops import rem as rem
from tgfx._lax_ops import round as round  # noqa: A004 - JAX's name
from tgfx._lax_ops import rsqrt as rsqrt
from tgfx._lax_ops import shift_left as shift_left
from tgfx._lax_ops import shift_right_arithmetic as shift_right_arithmetic
from tgfx._lax_ops import shift_right_logical as shift_right_logical
from tgfx._lax_ops import sign as sign
from tgfx._lax_ops import sin as sin
from tgfx._lax_ops import sinh as sinh
from tgfx._lax_ops import sqrt as sqrt
from tgfx._lax_ops import square as square
from tgfx._lax_ops import sub as sub
from tgfx._lax_ops import tan as tan
from tgfx._lax_ops import tanh as tanh
from tgfx._lax_scan import argmax as argmax
from tgfx._lax_scan import argmin as argmin
from tgfx._lax_scan import associative_scan as associative_scan
from tgfx._lax_scan import batch_matmul as batch_matmul
from tgfx._lax_scan import cumlogsumexp as cumlogsumexp
from tgfx._lax_scan import cummax as cummax
from tgfx._lax_scan import cummin as cummin
from tgfx._lax_scan import cumprod as cumprod
from tgfx._lax_scan import cumsum as cumsum
from tgfx._lax_scan import dot as dot
from tgfx._lax_scan import dot_general as dot_general
from tgfx._lax_scan import map as map  # noqa: A004 - JAX's name
from tgfx._lax_scan import reduce_and as reduce_and
from tgfx._lax_scan import reduce_max as reduce_max
from tgfx._lax_scan import reduce_min as reduce_min
from tgfx._lax_scan import reduce_or as reduce_or
from tgfx._lax_scan import reduce_prod as reduce_prod
from tgfx._lax_scan import reduce_sum as reduce_sum
from tgfx._lax_scan import reduce_xor as reduce_xor
from tgfx._lax_scan import sort as sort
from tgfx._lax_scan import sort_key_val as sort_key_val
from tgfx._lax_scan import top_k as top_k
from tgfx._lax_shape import bitcast_convert_type as bitcast_convert_type
from tgfx._lax_shape import broadcast as broadcast
from tgfx._lax_shape import broadcast_in_dim as broadcast_in_dim
from tgfx._lax_shape import broadcast_shapes as broadcast_shapes
from tgfx._lax_shape import broadcasted_iota as broadcasted_iota
from tgfx._lax_shape import clamp as clamp
from tgfx._lax_shape import collapse as collapse
from tgfx._lax_shape import concatenate as concatenate
from tgfx._lax_shape import convert_element_type as convert_element_type
from tgfx._lax_shape import dtype as dtype
from tgfx._lax_shape import expand_dims as expand_dims
from tgfx._lax_shape import full as full
from tgfx._lax_shape import full_like as full_like
from tgfx._lax_shape import index_in_dim as index_in_dim
from tgfx._lax_shape import iota as iota
from tgfx._lax_shape import pad as pad
from tgfx._lax_shape import reshape as reshape
from tgfx._lax_shape import rev as rev
from tgfx._lax_shape import select as select
from tgfx._lax_shape import select_n as select_n
from tgfx._lax_shape import slice as slice  # noqa: A004 - JAX's name
from tgfx._lax_shape import slice_in_dim as slice_in_dim
from tgfx._lax_shape import squeeze as squeeze
from tgfx._lax_shape import transpose as transpose
from tgfx._lax_slicing import dynamic_index_in_dim as dynamic_index_in_dim
from tgfx._lax_slicing import dynamic_slice as dynamic_slice
from tgfx._lax_slicing import dynamic_slice_in_dim as dynamic_slice_in_dim
from tgfx._lax_slicing import dynamic_update_index_in_dim as dynamic_update_index_in_dim
from tgfx._lax_slicing import dynamic_update_slice as dynamic_update_slice
from tgfx._lax_slicing import dynamic_update_slice_in_dim as dynamic_update_slice_in_dim
from tgfx._lax_window import padtype_to_pads as padtype_to_pads
from tgfx._lax_window import reduce_window as reduce_window
from tgfx.callback import TOKEN, chain_token, deliver
from tgfx.devices import DEFAULT_DEVICE, canonical_device
from tgfx.dtypes import DType, dtypes, promote_types, to_dtype
from tgfx.function import is_grad_input
from tgfx.ir.control import INDEX_DTYPE, LoopSpec, SwitchSpec, loop_results, n_bodies
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.inline import inline, substitute_outside_calls, walk
from tgfx.numpy._complex import conj as conj
from tgfx.numpy._complex import imag as imag
from tgfx.numpy._complex import make_complex
from tgfx.numpy._complex import real as real
from tgfx.tensor import Tensor, is_weak, promotion_kind, weak, weak_input, weak_like
from tgfx.trace_state import Trace, record_owner, tracing
from tgfx.transforms.collectives import all_gather as all_gather
from tgfx.transforms.collectives import axis_index as axis_index
from tgfx.transforms.collectives import pmax as pmax
from tgfx.transforms.collectives import pmean as pmean
from tgfx.transforms.collectives import pmin as pmin
from tgfx.transforms.collectives import psum as psum
from tgfx.transforms.collectives_more import all_to_all as all_to_all
from tgfx.transforms.collectives_more import axis_size as axis_size
from tgfx.transforms.collectives_more import ppermute as ppermute
from tgfx.transforms.collectives_more import pshuffle as pshuffle
from tgfx.transforms.collectives_more import psum_scatter as psum_scatter
from tgfx.transforms.grad import stop_gradient as stop_gradient
from tgfx.tree import PyTreeDef, keystr, tree_flatten_with_path, tree_leaves, tree_unflatten

complex = make_complex  # noqa: A001 - JAX's name: lax.complex(re, im)

_uid = itertools.count()


# ---- tracing a function into a body ----
def _name(f: Callable) -> str:
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or type(f).__qualname__


def _as_tensor(x: Any, device: str | None = None) -> Tensor | None:
    """An array leaf as a Tensor: a Python number weakly typed, as JAX's (it takes the type of what it meets)."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float, builtins.complex, np.ndarray, np.generic)):
        t = Tensor(x, device=device)
        return weak(t) if weak_input(x) else t
    return None


def _describe(t: Tensor | UOp) -> str:
    return f"{t.dtype.name}{list(t.shape)}"


def _leaves(who: str, what: str, tree: Any, device: str | None = None) -> tuple[list[Tensor], PyTreeDef, list[str]]:
    """The leaves of `tree` as Tensors (Python scalars and numpy arrays converted), its structure, each leaf's path."""
    pairs, treedef = tree_flatten_with_path(tree)
    out, paths = [], []
    for path, leaf in pairs:
        t = _as_tensor(leaf, device=device)
        if t is None:
            raise TypeError(f"{who}: {what}{keystr(path)} is a {type(leaf).__name__}, not an array; loop carries, "
                            f"scanned values and branch operands and results must be arrays (Tensors, numpy arrays "
                            f"or Python scalars)")
        if not isinstance(t.device, str):
            raise TypeError(f"{who}: {what}{keystr(path)} is on {t.device!r}; loops and branches run on one device")
        if t.uop.device is None and device is not None and device != DEFAULT_DEVICE:
            # a constant (`tnp.zeros`, `Tensor.full`): made on the loop's device, where the default device's buffer
            # was an operand the loop could not read
            t = t.to(device)
        out.append(t)
        paths.append(f"{what}{keystr(path)}")
    return out, treedef, paths


def _device(*trees: Any) -> str:
    """The device of the first Tensor in `trees` on one (Python scalars and constants are placed there too), else the
    default: a constant first (`scan(step, tnp.zeros(n), xs)`) ran the loop on the default device, not xs's."""
    for tree in trees:
        for leaf in tree_leaves(tree):
            if isinstance(leaf, Tensor) and isinstance(leaf.uop.device, str):
                return canonical_device(leaf.uop.device)
    return DEFAULT_DEVICE


def _stand_in(shape: tuple[int, ...], dtype: Any, device: str) -> UOp:
    """A value the traced function receives: a PARAM of its own (tagged, so it is never another trace's PARAM)."""
    return UOp(Ops.PARAM, dtype, (), (-1, tuple(shape), device), tag=("lax", next(_uid)))


def _run(name: str, f: Callable, args: tuple, described: dict[UOp, str]) -> Any:
    """Call `f` on stand-ins; reading a stand-in's value inside raises a concretization error naming it."""
    out, trace = _traced(name, f, args, described, None)
    if trace.effects.happened:
        raise NotImplementedError(f"{name} ran a host callback (debug.print, io_callback, ...): tgfx runs those in "
                                  f"loop bodies and branches, not in a while_loop's cond_fun; move it into body_fun")
    return out


def _traced(name: str, f: Callable, args: tuple, described: dict[UOp, str], token: UOp | None) -> tuple[Any, Trace]:
    """`_run`, the host callbacks inside chained from effect token `token` (a stand-in): the result and the Trace it
    ran in (its effect chain, what it checkpointed)."""
    record_owner(tuple(described), name)  # a stand-in kept past the call is an escaped tracer naming `name`
    with tracing(name, described, token=token) as trace:
        return f(*args), trace


def close_over(bodies: list[list[UOp]], lead: list[UOp], rest: list[UOp], device: str) -> tuple[list[UOp],
                                                                                                 list[UOp]]:
    """Each body's results as a TUPLE over PARAMs by slot, and the outside values they read (the consts, the
    operands of those slots).

    Slots: the `lead` stand-ins first (a loop's step index), then the consts, then the `rest` stand-ins. A const is
    the largest piece of the body that reads outside data (buffers, other traces' values) but none of the
    stand-ins, less the movement ops on top of it (they stay in the body, so a broadcast is not materialised): it is
    computed once, outside, and every body reads it through one PARAM.
    """
    mine = set(lead) | set(rest)
    tuples = [inline(UOp(Ops.TUPLE, None, tuple(b)), custom=False) for b in bodies]
    consts: dict[UOp, None] = {}
    for tup in tuples:
        order = walk(tup)
        dep: set[UOp] = set()
        ext: set[UOp] = set()
        for u in order:
            srcs = u.src[n_bodies(u):]
            if u in mine or any(s in dep for s in srcs):
                dep.add(u)
            elif u.op in (Ops.BUFFER, Ops.PARAM, Ops.COPY, Ops.REDUCE_AXIS) or is_grad_input(u) or \
                    any(s in ext for s in srcs):
                # data from outside, a device move or a reduction: worth doing once, before the loop. A value being
                # differentiated is one even when it is a constant (`tnp.full(3, 0.1)`): as a literal of the body, the
                # loop's gradient never reached it
                ext.add(u)
        for u in order:
            if u in dep or u is tup:
                for s in u.src[n_bodies(u):]:
                    if s in ext or (u is tup and s not in dep):   # a constant result is made once, outside, too
                        while s.op in GroupOp.Movement and s.src[0] in ext:
                            s = s.src[0]
                        consts[s] = None
    operands = []
    for c in consts:
        if c.device is None:        # a constant: made on the loop's device
            c = UOp(Ops.COPY, c.dtype, (c,), device)
        elif not isinstance(c.device, str) or canonical_device(c.device) != device:
            raise TypeError(f"a loop or branch on {device} reads a {_describe(c)} value on {c.device!r} from "
                            f"outside; move it to {device} first (Tensor.to)")
        operands.append(c)

    def param(slot: int, u: UOp) -> UOp:
        return UOp(Ops.PARAM, u.dtype, (), (slot, tuple(u.shape), device))

    order = [*lead, *consts, *rest]
    mapping = {u: param(i, u) for i, u in enumerate(order)}
    return [substitute_outside_calls(t, mapping) for t in tuples], operands


def _carry_leaves(who: str, name: str, what: str, treedef: PyTreeDef, paths: list[str], out: Any,
                  device: str) -> list[Tensor]:
    """A function's new carry as Tensors (a Python number weakly typed), which must have the structure it received."""
    pairs, out_tree = tree_flatten_with_path(out)
    if out_tree != treedef:
        raise TypeError(f"{who}: {name} must return {what} with the structure it received, {treedef!r}, but returned "
                        f"{out_tree!r}")
    leaves = []
    for (_, leaf), path in zip(pairs, paths, strict=True):
        t = _as_tensor(leaf, device)
        if t is None:
            raise TypeError(f"{who}: {name} returned a {type(leaf).__name__} for {path}, not an array")
        leaves.append(t)
    return leaves


def _promote_weak_carry(carry: list[Tensor], new: list[Tensor]) -> list[Tensor] | None:
    """The init leaves again, each weakly typed one whose body returned another type converted to the JAX result type
    of the two (strongly typed), as JAX's `_promote_weak_typed_input`: `scan(lambda c, x: (c * x, c), 1.0, xs16)`
    carries a float16. None when no leaf needs it. (A weak init differing only in weakness, float32 returned for a
    Python float, is left as it is.)"""
    if not any(is_weak(c) and (c.shape, c.dtype) != (t.shape, t.dtype) for c, t in zip(carry, new, strict=True)):
        return None
    return [Tensor(c.cast(promote_types(promotion_kind(c), promotion_kind(t))).uop)
            if is_weak(c) and (c.shape, c.dtype) != (t.shape, t.dtype) else c for c, t in zip(carry, new, strict=True)]


def _check_carry(who: str, name: str, carry: list[Tensor], new: list[Tensor], paths: list[str],
                 init_paths: list[str], promoted: set[int]) -> None:
    """The new carry must have the shapes and dtypes of the carry received (weak typing aside, as JAX's typematch)."""
    for k, (old, t, path, init_path) in enumerate(zip(carry, new, paths, init_paths, strict=True)):
        if (t.shape, t.dtype) == (old.shape, old.dtype):
            continue
        if t.shape != old.shape:
            fix = f"give {init_path} the shape {t.shape} the body computes, or make the body keep {old.shape}"
        elif k in promoted or is_weak(old):
            how = (f"took the JAX result type of itself and what the body returned, {old.dtype.name}, for a second "
                   f"trace, where the body returned {t.dtype.name}" if k in promoted else
                   f"matched the body's first trace, but in the second, after another weak carry took the type the "
                   f"body returns, the body returned {t.dtype.name} for it")
            fix = (f"{init_path} is weakly typed (a Python scalar) and {how} (JAX traces twice at most); give "
                   f"{init_path} an explicit dtype, e.g. tnp.asarray(..., tnp.{t.dtype.name})")
        else:
            fix = (f"cast the new value with .astype(tnp.{old.dtype.name}), or give {init_path} the dtype "
                   f"{t.dtype.name}")
            if is_weak(t):
                fix += (f" (the body's value is weakly typed, from Python scalars, but a strongly typed carry does not "
                        f"convert it: write tnp.asarray(v, tnp.{old.dtype.name}))")
        raise TypeError(f"{who}: {name} changed the type of {path}: it received {_describe(old)} and returned "
                        f"{_describe(t)}; a carry keeps its shape and dtype from step to step: {fix}")


# ---- the loop ----
class _Step(NamedTuple):
    """One trace of a loop's step: its stand-ins (the index, the carry, one step's x), what it returned, the cond's
    predicate (None without a cond)."""
    index: UOp
    carry_si: list[UOp]
    x_si: list[UOp]
    new_carry: list[Tensor]
    ys: list[Tensor]
    y_tree: PyTreeDef
    pred: Tensor | None
    effect: tuple[UOp, UOp] | None   # the step's host callbacks: (the token stand-in they start from, the last token)
    remat: bool                      # the step calls tg.checkpoint: its backward recomputes it, saving no residuals


def _trace_step(who: str, name: str, step: Callable, cond: Callable | None, carry: list[Tensor], carry_tree: PyTreeDef,
                carry_paths: list[str], x_leaves: list[Tensor], x_tree: PyTreeDef, x_paths: list[str],
                device: str) -> _Step:
    """Trace the step (and cond) once on stand-ins of the carry's types and one step's slice of each x, weakly typed
    where those are."""
    index = _stand_in((), INDEX_DTYPE, device)
    carry_si = [_stand_in(t.shape, t.dtype, device) for t in carry]
    x_si = [_stand_in(t.shape[1:], t.dtype, device) for t in x_leaves]
    described = {**dict(zip(carry_si, carry_paths, strict=True)),
                 **{s: p + "[i]" for s, p in zip(x_si, x_paths, strict=True)}, index: "i (the loop index)"}
    def arg(si: list[UOp], like: list[Tensor]) -> list[Tensor]:
        return weak_like([Tensor(s) for s in si], [is_weak(t) for t in like])
    carry_arg = tree_unflatten(carry_tree, arg(carry_si, carry))
    x_arg = tree_unflatten(x_tree, arg(x_si, x_leaves))
    token = _stand_in((), TOKEN, device)
    out, trace = _traced(name, step, (Tensor(index), carry_arg, x_arg), described, token)
    effects = trace.effects
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(f"{who}: {name} must return a pair (carry, y), got {type(out).__name__}")
    new_carry, y = out
    new_leaves = _carry_leaves(who, name, "a carry", carry_tree, carry_paths, new_carry, device)
    y_leaves, y_tree, _ = _leaves(who, f"the y returned by {name}", y, device)
    pred = None
    if cond is not None:
        cname = getattr(cond, "__qualname__", "cond_fun")
        pred = _as_tensor(_run(cname, cond, (Tensor(index), carry_arg), described))
        if pred is None or pred.shape != () or pred.dtype != dtypes.bool:
            got = _describe(pred) if pred is not None else type(pred).__name__
            raise TypeError(f"{who}: cond_fun {cname} must return a boolean scalar, got {got}")
    return _Step(index, carry_si, x_si, new_leaves, y_leaves, y_tree, pred,
                 (token, effects.token) if effects.happened else None, bool(trace.checkpointed))


def _loop(who: str, f: Callable, step: Callable, init: Any, xs: Any, length: int | None, reverse: bool = False,
          cond: Callable | None = None, trip: Tensor | None = None) -> tuple[Any, Any]:
    """Trace `step(i, carry, x) -> (new carry, y)` (and `cond(i, carry) -> bool`) and build the LOOP; returns
    (final carry, stacked ys) in the structures the functions used.

    Weak types as JAX's: a Python scalar in `init` (or a weakly typed Tensor) is a weakly typed carry, and when the
    body returns another type for it (`c * x` with float16 x), it is converted to the JAX result type of the two and
    the step traced once more, so `scan(lambda c, x: (c * x, c), 1.0, xs16)` carries a float16. The results are
    weakly typed where the body returned weakly typed values (the final carry as the step's last trace returned it)."""
    name = _name(f)
    device = _device(init, xs)
    carry, carry_tree, init_paths = _leaves(who, "init", init, device)
    carry_paths = ["carry" + p[len("init"):] for p in init_paths]   # what the functions receive
    x_leaves, x_tree, x_paths = _leaves(who, "xs", xs, device)
    trace = (who, name, step, cond)
    traced = _trace_step(*trace, carry, carry_tree, carry_paths, x_leaves, x_tree, x_paths, device)
    promoted_carry = _promote_weak_carry(carry, traced.new_carry)
    promoted: set[int] = set()
    if promoted_carry is not None:   # JAX's second pass (and last: a carry that changes again is an error, as there)
        promoted = {k for k, (a, b) in enumerate(zip(carry, promoted_carry, strict=True)) if a is not b}
        carry = promoted_carry
        traced = _trace_step(*trace, carry, carry_tree, carry_paths, x_leaves, x_tree, x_paths, device)
    index, carry_si, x_si, new_leaves, y_leaves, y_tree, pred, effect, remat = traced
    _check_carry(who, name, carry, new_leaves, carry_paths, init_paths, promoted)
    if effect is not None:   # host callbacks in the step: their effect token is one more carry, the last
        carry, carry_si, new_leaves = [*carry, chain_token(device)], [*carry_si, effect[0]], \
            [*new_leaves, Tensor(effect[1])]
    bodies = [[*(t.uop for t in new_leaves), *(t.uop for t in y_leaves)]]
    if pred is not None:
        bodies.append([pred.uop])
    closed, consts = close_over(bodies, [index], [*carry_si, *x_si], device)
    spec = LoopSpec(name, len(consts), len(carry), len(x_leaves), length, device, reverse, cond is not None,
                    trip is not None, remat=remat)
    operands = [*consts, *(t.uop for t in carry), *(t.uop for t in x_leaves), *([] if trip is None else [trip.uop])]
    loop = UOp(Ops.LOOP, None, (*closed, *operands), spec)
    k, n_y = len(carry), len(y_leaves)
    res = [Tensor(UOp(Ops.GETTUPLE, d, (loop,), i)) for i, (_, d) in enumerate(loop_results(loop)[:k + n_y])]
    res = weak_like(res, [is_weak(t) for t in (*new_leaves, *y_leaves)])
    if effect is not None:   # the last step's token continues the caller's chain
        token = res.pop(k - 1)
        k -= 1
        deliver(token.uop, res)
    return tree_unflatten(carry_tree, res[:k]), tree_unflatten(y_tree, res[k:])


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1) -> tuple[Any, Any]:
    """Run `f(carry, x) -> (carry, y)` over the leading axis of `xs`, as `jax.lax.scan`; returns (carry, ys).

    Python semantics::

        def scan(f, init, xs, length=None, reverse=False):
            carry, ys = init, []
            for x in (reversed(xs) if reverse else xs):
                carry, y = f(carry, x)
                ys.append(y)
            return carry, stack(ys[::-1] if reverse else ys)

    `init`, `xs` and the results are pytrees of arrays; every leaf of `xs` is scanned along its first axis (all the
    same length), and `xs=None` with `length=n` scans n times with x = None. The carry must keep its structure,
    shapes and dtypes; a Python scalar in `init` is weakly typed and takes the dtype the body returns for it, as in
    JAX (`scan(lambda c, x: (c * x, c), 1.0, xs16)` carries a float16). `f` is traced once; the loop runs on the
    device (its compile time and kernels do not depend on the length). `unroll` is accepted for JAX compatibility and
    has no effect.

    >>> def rnn_step(h, x):
    ...     h = tnp.tanh(h @ W + x @ U)
    ...     return h, h
    >>> h_last, hs = tg.lax.scan(rnn_step, h0, x_seq)     # x_seq: (T, batch, d) -> hs: (T, batch, hidden)

    Raises TypeError when the carry changes type, or `f` returns something that is not a pair of pytrees of
    arrays; ValueError when the leaves of xs have different lengths or length disagrees with them.
    """
    x_leaves, _, x_paths = _leaves("scan", "xs", xs)
    lengths = {}
    for t, p in zip(x_leaves, x_paths, strict=True):
        if not t.shape:
            raise ValueError(f"scan: {p} is a scalar; every leaf of xs needs a leading axis to scan over")
        lengths[p] = t.shape[0]
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f"{p} has {n}" for p, n in lengths.items())
        raise ValueError(f"scan: the leaves of xs must have the same leading axis length, but {listed}")
    if length is not None and (not isinstance(length, (int, np.integer)) or length < 0):
        raise TypeError(f"scan: length must be a non-negative int, got {length!r}")
    n = next(iter(lengths.values())) if lengths else length
    if n is None:
        raise ValueError("scan: with no xs to scan over, give the number of steps as length=")
    if length is not None and length != n:
        raise ValueError(f"scan: length={length} but the leaves of xs have leading axis length {n}")
    return _loop("scan", f, lambda i, c, x: f(c, x), init, xs, int(n), bool(reverse))


def fori_loop(lower: int | Tensor, upper: int | Tensor, body_fun: Callable, init_val: Any, *,
              unroll: int | bool | None = None) -> Any:
    """`for i in range(lower, upper): val = body_fun(i, val)`, as `jax.lax.fori_loop`; returns the final val.

    With Python int bounds this is a scan of `upper - lower` steps, differentiable in reverse mode; with Tensor
    bounds (e.g. arguments of a jitted function) the trip count is read on the device, like JAX's while loop.
    `i` is typed as JAX's: with known bounds a weak int32 (int64 with x64); with traced ones the bounds' type (a
    Python int bound takes the other's; two other types are a TypeError), weak if lower is a Python int of that
    type. The body is traced once: a 1,000-step loop
    compiles exactly what a 10-step loop does.
    An elementwise body (no reduce, no movement mixing elements) runs as one kernel with the steps as a loop inside
    it. `unroll` is accepted for JAX compatibility and has no effect.

    >>> tg.lax.fori_loop(0, 10, lambda i, x: x + i, 0.0)    # 45.0
    """
    def body(i: Tensor, c: Any, _x: Any) -> tuple[Any, None]:
        index = Tensor((i.astype(index_dtype) + lo).uop)
        return body_fun(weak(index) if weak_index else index, c), None
    if not isinstance(lower, Tensor) and not isinstance(upper, Tensor):
        lo, hi = _int_bound("lower", lower), _int_bound("upper", upper)
        _fori_index_type(lower, upper)   # (bounds of two types are an error, as in JAX)
        # as JAX's: known bounds make a scan whose i starts at the Python int `int(lower)`, weakly typed of the default
        # int type (int64 with x64), whatever the bounds' types: `fori_loop(0, 3, lambda i, c: c + i, 0)` stays weak
        index_dtype, weak_index = dtypes.default_int, True
        return _loop("fori_loop", body_fun, body, init_val, None, hi - lo if hi > lo else 0)[0]
    # a number bound goes where the Tensor bound is (`fori_loop(0, n)` with n on a GPU)
    where = _device(upper, lower)
    lo_t, hi_t = (_scalar_int("fori_loop", what, v, where) for what, v in (("lower", lower), ("upper", upper)))
    index_dtype, lo_weak = _fori_index_type(lower, upper)
    # as JAX's: bounds that are known (read no traced value) make that scan too; traced ones a while loop starting i at
    # lower converted to the bounds' type, weakly typed if lower is and needed no conversion
    if not any(u.op is Ops.PARAM for t in (lo_t, hi_t) for u in t.uop.toposort()):
        # (of their values: a loop whose count is read on the device has no reverse mode, and JAX's scan has)
        lo, hi = int(lo_t.item()), int(hi_t.item())
        index_dtype, weak_index = dtypes.default_int, True
        return _loop("fori_loop", body_fun, body, init_val, None, hi - lo if hi > lo else 0)[0]
    weak_index = lo_weak and lo_t.dtype == index_dtype
    lo = lo_t.astype(index_dtype)
    trip = _clamp0(hi_t.cast(INDEX_DTYPE) - lo_t.cast(INDEX_DTYPE))
    return _loop("fori_loop", body_fun, body, init_val, None, None, trip=trip)[0]


def _fori_index_type(lower: Any, upper: Any) -> tuple[DType, bool]:
    """The type of fori_loop's `i` over traced bounds, and whether lower is weakly typed, as JAX's: the bounds' type
    when they agree; a Python int (or weak) bound takes the other's signed type; other mixes are an error."""
    def kind(v: Any) -> tuple[DType, bool]:   # (a bound checked to be an integer scalar)
        if isinstance(v, Tensor):
            return v.dtype, is_weak(v)
        return (dtypes.default_int, True) if isinstance(v, int) else (to_dtype(v.dtype), False)
    (lo_d, lo_w), (hi_d, hi_w) = kind(lower), kind(upper)
    if lo_d == hi_d:
        return lo_d, lo_w
    if lo_d.is_int and hi_d.is_int and not lo_d.is_unsigned and not hi_d.is_unsigned and lo_w != hi_w:
        return (hi_d if lo_w else lo_d), lo_w
    raise TypeError(f"fori_loop: lower and upper must have equal types, got {lo_d.name} and {hi_d.name} (as in JAX, "
                    f"only a Python int bound takes the other's type); cast one with .astype(), e.g. "
                    f"upper.astype(tnp.{lo_d.name})")


def _int_bound(what: str, v: Any) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"fori_loop: {what} must be an int or an integer scalar Tensor, got {type(v).__name__}")
    return int(v)


def _scalar_int(who: str, what: str, v: Any, device: Any = None) -> Tensor:
    t = _as_tensor(v, device)
    if t is None or t.shape != () or not t.dtype.is_int:
        got = _describe(t) if t is not None else type(v).__name__
        raise TypeError(f"{who}: {what} must be an integer scalar, got {got}")
    return t


def _clamp0(t: Tensor) -> Tensor:
    zero = Tensor(UOp.const(t.dtype, 0))
    return (t < zero).where(zero, t)


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any, *, max_steps: int | None = None) -> Any:
    """`while cond_fun(val): val = body_fun(val)`, as `jax.lax.while_loop`; returns the final val.

    The condition is evaluated on the device before every step, so the loop takes as many steps as the data says,
    with no host round trip. `max_steps` bounds it (the loop stops after that many steps even if cond_fun is still
    true) and makes it differentiable in reverse mode: the forward keeps the carry of every step taken (memory for
    `max_steps` carries) and the backward runs back over exactly the steps taken. Without `max_steps`, `grad`
    through it is an error, as in JAX; forward mode (`jvp`, `jacfwd`) runs either way, a tangent beside each carry.

    >>> tg.lax.while_loop(lambda x: x < 100.0, lambda x: x * 2.0, 1.0)    # 128.0
    """
    if max_steps is not None and (not isinstance(max_steps, (int, np.integer)) or max_steps < 0):
        raise TypeError(f"while_loop: max_steps must be a non-negative int or None, got {max_steps!r}")
    def cond(i: Tensor, c: Any) -> Any:
        return cond_fun(c)
    cond.__qualname__ = _name(cond_fun)
    out = _loop("while_loop", body_fun, lambda i, c, x: (body_fun(c), None), init_val, None,
                None if max_steps is None else int(max_steps), cond=cond)
    return out[0]


# ---- branches ----
def switch(index: Any, branches: Sequence[Callable], *operands: Any) -> Any:
    """`branches[index](*operands)`, the index clamped to [0, len(branches) - 1], as `jax.lax.switch`.

    The branch is chosen on the device from the index's value: only that branch runs, so an expensive branch not
    taken costs nothing, and under `jit` the program is encoded once with every branch in it. Every branch is
    traced and must return the same structure, shapes and dtypes; a result is weakly typed where branch 0's is.

    >>> tg.lax.switch(k, [lambda x: x + 1, lambda x: x * 2, tnp.sin], x)
    """
    return _switch("switch", index, list(branches), operands)


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any) -> Any:
    """`true_fun(*operands) if pred else false_fun(*operands)`, as `jax.lax.cond`, decided on the device.

    `pred` is a scalar (bool, or a number compared with 0). Both functions are traced and must return the same
    structure, shapes and dtypes (not promoted to each other: `lambda: 1.0` beside a float16 result is an error, as
    in JAX); only the one the predicate picks runs. A result is weakly typed where false_fun's is (JAX's rule).

    >>> tg.lax.cond(x.sum() > 0, lambda x: x * 2, lambda x: -x, x)
    """
    p = _as_tensor(pred)
    if p is None or p.shape != ():
        got = f"shape {p.shape}" if p is not None else f"a {type(pred).__name__}"
        raise TypeError(f"cond: pred must be a scalar (bool or number), got {got}; reduce it first, e.g. "
                        f"(x > 0).all()")
    zero = Tensor.full((), 0, p.dtype, device=p.device)
    return _switch("cond", p if p.dtype == dtypes.bool else Tensor(p.uop.alu(Ops.CMPNE, zero.uop)),
                   [false_fun, true_fun], operands)


def _switch(who: str, index: Any, branches: list[Callable], operands: tuple) -> Any:
    if not branches or not all(callable(b) for b in branches):
        raise TypeError(f"{who}: branches must be a non-empty sequence of functions, got {branches!r}")
    idx = _as_tensor(index)
    if idx is None or idx.shape != () or idx.dtype.is_float:
        got = _describe(idx) if idx is not None else type(index).__name__
        raise TypeError(f"{who}: the index must be an integer or bool scalar, got {got}")
    device = _device(operands, idx)
    args, arg_tree, arg_paths = _leaves(who, "operands", operands, device)
    if len(branches) == 1:
        return branches[0](*operands)
    idx = idx.astype(dtypes.int32)
    if who == "switch":
        lo, hi = Tensor.full((), 0, dtypes.int32), Tensor.full((), len(branches) - 1, dtypes.int32)
        idx = (idx < lo).where(lo, (hi < idx).where(hi, idx))
    si = [_stand_in(t.shape, t.dtype, device) for t in args]
    described = dict(zip(si, arg_paths, strict=True))
    stand_args = tree_unflatten(arg_tree, weak_like([Tensor(s) for s in si], [is_weak(t) for t in args]))
    outs, first = [], None
    token, effects = _stand_in((), TOKEN, device), []
    for k, b in enumerate(branches):
        res, tr = _traced(_name(b), b, tuple(stand_args), described, token)
        effects.append(tr.effects.token)
        what = f"the result of branch {k} ({_name(b)})"
        leaves, tree, paths = _leaves(who, what, res, device)
        if first is None:
            first = (tree, leaves, ["output" + p[len(what):] for p in paths])
        else:
            _same_types(who, branches, first, k, tree, leaves)
        outs.append([t.uop for t in leaves])
    effect = any(t is not token for t in effects)
    if effect:   # host callbacks in a branch: the effect token passes through every branch, the last result
        outs = [[*o, t] for o, t in zip(outs, effects, strict=True)]
        si, args = [*si, token], [*args, chain_token(device)]
    closed, consts = close_over(outs, [], si, device)
    spec = SwitchSpec("|".join(_name(b) for b in branches), len(branches), device)
    sw = UOp(Ops.SWITCH, None, (*closed, idx.uop, *consts, *(t.uop for t in args)), spec)
    res = [Tensor(UOp(Ops.GETTUPLE, o.dtype, (sw,), i)) for i, o in enumerate(closed[0].src)]
    if effect:
        deliver(res.pop().uop, res)
    # weakly typed where the first branch's result is (false_fun's for cond), as JAX's: its results take the first
    # branch's types, and weak typing is not part of what must match
    return tree_unflatten(first[0], weak_like(res, [is_weak(t) for t in first[1]]))


def _same_types(who: str, branches: list[Callable], first: tuple[PyTreeDef, list[Tensor], list[str]], k: int,
                tree: PyTreeDef, leaves: list[Tensor]) -> None:
    """Branch k must return the first branch's structure, shapes and dtypes (weak typing aside, as JAX's)."""
    def branch(j: int) -> str:
        return f"{('false_fun', 'true_fun')[j] if who == 'cond' else f'branch {j}'} ({_name(branches[j])})"
    first_tree, first_leaves, paths = first
    if tree != first_tree:
        raise TypeError(f"{who}: every branch must return the same structure, shapes and dtypes, but {branch(0)} "
                        f"returns {first_tree!r} and {branch(k)} returns {tree!r}")
    for a, b, path in zip(first_leaves, leaves, paths, strict=True):
        if (a.shape, a.dtype) == (b.shape, b.dtype):
            continue
        if a.shape != b.shape:
            fix = "make their shapes agree"
        elif is_weak(a) != is_weak(b):   # (a Python scalar beside an array, the commonest slip)
            j, strong = (0, b) if is_weak(a) else (k, a)
            fix = (f"the result of {branch(j)} is weakly typed (a Python scalar, or computed from them alone), but "
                   f"branches' results are not promoted to each other, as in JAX: make it {strong.dtype.name}, e.g. "
                   f"tnp.asarray(v, tnp.{strong.dtype.name})")
        else:
            fix = f"cast one with .astype, e.g. .astype(tnp.{promote_types(a.dtype, b.dtype).name})"
        raise TypeError(f"{who}: every branch must return the same structure, shapes and dtypes, but {branch(0)} "
                        f"returns {_describe(a)} and {branch(k)} returns {_describe(b)} for {path}; {fix}")


__all__ = ["scan", "fori_loop", "while_loop", "cond", "switch", "close_over",
           "dynamic_slice", "dynamic_slice_in_dim", "dynamic_index_in_dim", "dynamic_update_slice",
           "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim",
           "conv_general_dilated", "conv", "conv_with_general_padding", "conv_dimension_numbers",
           "ConvDimensionNumbers", "Precision", "reduce_window", "padtype_to_pads", "add", "mul", "max", "min",
           "RoundingMethod", "abs", "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
           "bitwise_not", "bitwise_or", "bitwise_xor", "cbrt", "ceil", "clz", "cos", "cosh", "digamma", "div", "eq",
           "erf", "erf_inv", "erfc", "exp", "exp2", "expm1", "floor", "ge", "gt", "integer_pow", "is_finite", "le",
           "lgamma", "log", "log1p", "logistic", "lt", "ne", "neg", "nextafter", "population_count", "pow",
           "reciprocal", "rem", "round", "rsqrt", "shift_left", "shift_right_arithmetic", "shift_right_logical",
           "sign", "sin", "sinh", "sqrt", "square", "sub", "tan", "tanh",
           "bitcast_convert_type", "broadcast", "broadcast_in_dim", "broadcasted_iota", "clamp", "collapse",
           "concatenate", "convert_element_type", "expand_dims", "full", "full_like", "index_in_dim", "iota", "pad",
           "reshape", "rev", "select", "select_n", "slice", "slice_in_dim", "squeeze", "transpose",
           "argmax", "argmin", "associative_scan", "batch_matmul", "cumlogsumexp", "cummax", "cummin", "cumprod",
           "cumsum", "dot", "dot_general", "map", "reduce_and", "reduce_max", "reduce_min", "reduce_or",
           "reduce_prod", "reduce_sum", "reduce_xor", "sort", "sort_key_val", "top_k", "stop_gradient",
           "conv_transpose", "conv_general_dilated_patches", "conv_shape_tuple", "conv_general_shape_tuple",
           "conv_transpose_shape_tuple", "conv_general_permutations", "reduce_window_shape_tuple",
           "igamma", "igammac", "igamma_grad_a", "random_gamma_grad", "betainc", "polygamma", "zeta", "bessel_i0e",
           "bessel_i1e", "stack", "unstack", "split", "tile", "broadcast_to_rank", "empty", "scatter_sub",
           "scatter_apply", "index_take", "approx_max_k", "approx_min_k", "reduce_precision", "mulhi", "FftType",
           "fft", "custom_root", "custom_linear_solve", "optimization_barrier", "with_sharding_constraint",
           "platform_dependent", "psum", "pmean", "pmax", "pmin", "all_gather", "axis_index",
           "ppermute", "pshuffle", "psum_scatter", "all_to_all", "axis_size", "broadcast_shapes", "dtype"]
