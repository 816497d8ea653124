"""`tgfx.Tensor`: an immutable, lazy array.

Building one runs nothing; reading it (`numpy()`, `item()`, ...) realises it (`tgfx/_realize.py`).

A Tensor holds a `UOp`. The methods here are the primitives every numpy function is built from: creation,
elementwise ops with broadcasting and JAX promotion, the six movement ops, reductions and casts. The numpy surface
(`tgfx.numpy`) and the rest of the Tensor methods are written on top of them.
"""
from __future__ import annotations

import _thread
import functools
import math
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from tgfx import _trace_constants as trace_constants
from tgfx.devices import DEFAULT_DEVICE, get_device
from tgfx.devices import canonical_device as _canon
from tgfx.devices.network import DistributedError
from tgfx.dtypes import (
    DType,
    bf16_to_f32,
    cast_scalar,
    dtypes,
    f32_to_bf16,
    fits,
    from_numpy,
    list_leaf_kinds,
    of_numpy,
    promote_types,
    scalar_kind,
    to_dtype,
    to_inexact,
    typed_host,
)
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp, prod
from tgfx.lowering.execute import copyin, copyout, memory_of, range_view, read_first
from tgfx.lowering.inline import EscapedTracerError
from tgfx.lowering.layout import buffer_view, new_buffer
from tgfx.trace_state import (
    ConcretizationError,
    TracerArrayConversionError,
    TracerBoolConversionError,
    TracerIntegerConversionError,
    active,
    current,
)

Scalar = bool | int | float | complex
LITERAL = "literal"  # the tag of a CONST that stays a literal in eager kernels (Tensor.literal)
# the tag of a half float's cast to float32 inside a dot or a sum (`Tensor.widened`): reverse mode transposes each use
# of it (and of its views) on its own, rounding each use's cotangent to the half type, as JAX transposes each half dot
# into a half dot
WIDENED = "widened half"
ArrayLike = Any  # Tensor, numpy array, nested lists, Python scalars


def canonical_device(device: str | tuple[str, ...] | None) -> str | tuple[str, ...]:
    if isinstance(device, (tuple, list)):
        return tuple(_canon(d) for d in device)
    return _canon(device or DEFAULT_DEVICE)


class ShapeError(ValueError, TypeError):
    """Shapes that do not fit an operation (broadcasting, a contraction, a reshape, a concatenation): a ValueError as
    numpy raises and a TypeError as JAX does, so `except TypeError` around a mismatched matmul, JAX's Neural Network
    tutorial's check, catches it as `except ValueError` does."""


_GLOBAL = object()   # what `Tensor._shown` gives for a value spread over processes


class Tensor:
    """A lazy n-dimensional array. `Tensor(data, dtype=None, device=None)`; see also `tgfx.asarray`."""

    __slots__ = ("uop", "__weakref__")
    __array_priority__ = 100  # numpy defers to our reflected operators

    def __init__(self, data: ArrayLike, dtype: DType | str | None = None, device: str | None = None) -> None:
        if isinstance(data, UOp):
            self.uop = data
            if data.op is _RESHAPE and data.src[0].op is _BUFFER:   # a computed value in another shape (a jitted
                key = id(self)                                        # call's scalar): a view, nothing to compute
                _views[key] = weakref.ref(self, functools.partial(_views_pop, key))
            elif data.op not in _STORED and (data.op is not Ops.MULTI or not is_realized(data)):
                key = id(self)   # (`_register`, inlined: this runs for every op)
                if _other_threads():   # (a thread's own Tensor: `ThreadRef`; none while no other thread runs)
                    ref = ThreadRef(self, functools.partial(_lazy_pop, key))
                    ref.owner = _get_ident()
                else:
                    ref = weakref.ref(self, functools.partial(_lazy_pop, key))
                _lazy[key] = ref
                base = data   # (`_realize._view_base`, inlined)
                while base.op in _VIEWS and base.src:
                    base = base.src[0]
                if base.op not in _STORED:   # the node this Tensor is a value of knows it (`_realize._holds_values_of`)
                    if (held := base.__dict__.get("held_by")) is None:
                        base.__dict__["held_by"] = [ref]
                    else:
                        if len(held) >= 8:   # (one node wrapped again and again: the dead go)
                            held[:] = [r for r in held if r() is not None]
                        held.append(ref)
                if lazy_depth(data) > LAZY_DEPTH and not active() and not _differentiating():
                    try:
                        _realize.realize(self, deep=True)
                    except (EscapedTracerError, ConcretizationError):
                        # a graph of a transform's traced values, built outside its trace (a custom rule run by a
                        # gradient walk): left lazy, as every graph was before it grew deep; checked again 32 ops on
                        data.__dict__["lazy_depth"] = 0
            return
        if isinstance(device, (tuple, list)):  # replicated on a device tuple
            from tgfx.transforms.shard import shard
            self.uop = shard(Tensor(data, dtype), device).uop
            return
        if isinstance(data, Tensor):
            t = data if dtype is None else data.astype(dtype)
            self.uop = t.uop if device is None or canonical_device(device) == t.device else t.to(device).uop
            return
        self.uop = _from_host(data, None if dtype is None else to_dtype(dtype), canonical_device(device))

    # ---- properties ----
    @property
    def shape(self) -> tuple[int, ...]:
        return self.uop.shape

    @property
    def dtype(self) -> DType:
        return self.uop.dtype

    @property
    def device(self) -> str | tuple[str, ...]:
        """The device, or for a sharded Tensor the tuple of its devices. A constant has no buffer yet and is computed
        on the default device: canonically named, so jit signatures of `tnp.zeros(...)` and of its computed successor
        are the same."""
        return self.uop.device or DEFAULT_DEVICE

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d Tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        """The rows along the first axis, as a JAX array iterates (`key, sub = tg.random.split(key)`): one index
        each, and no failing index to end the loop."""
        if not self.shape:
            raise TypeError("iteration over a 0-d Tensor")
        if is_realized(u := self.uop) and u.op is not Ops.MULTI and not active():
            # rows of a computed buffer in host memory are ranges of its memory: no graph, nothing to compute
            rest = self.shape[1:]
            rows = [range_view(UOp(Ops.RESHAPE, u.dtype, (UOp(Ops.SHRINK, u.dtype, (u,), ((i, i + 1),
                    *((0, n) for n in rest))),), rest)) for i in range(self.shape[0])]
            if all(r is not None for r in rows):
                if placement.marked and placement.is_committed(self):   # (rows of a committed value are too)
                    rows = [placement.mark(r) for r in rows]
                return iter([Tensor(r) for r in rows])
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self) -> str:
        value = self._shown()
        if value is None:
            return self._traced_text()
        if value is _GLOBAL:
            return f"Tensor(shape={self.shape}, dtype={self.dtype.name}, device={self.device!r})"
        return f"Tensor({value!r}, dtype={self.dtype.name}, device={self.device!r})"

    def __str__(self) -> str:
        """numpy's text of the value, as `print(jax_array)` shows it (`repr` adds the dtype and device)."""
        value = self._shown()
        if value is _GLOBAL:
            return repr(self)
        return self._traced_text() if value is None else str(value)

    def _shown(self) -> Any:
        """The value to print, or None for a traced value (an argument of a running jit, or one that escaped its
        trace), which prints as its type and shape instead of failing: `print(x)` inside a jitted function is how
        JAX's tutorials show what tracing sees. `_GLOBAL` for a value sharded over several processes, which this
        one cannot read whole: it prints its shape, dtype and devices, as JAX prints such an array."""
        try:
            return self.numpy()
        except (ConcretizationError, EscapedTracerError):
            return None
        except DistributedError:
            return _GLOBAL

    def _traced_text(self) -> str:
        return f"Traced<{'~' if _is_weak_tensor(self) else ''}{self.dtype.name}[{','.join(map(str, self.shape))}]>"

    def __format__(self, spec: str) -> str:
        """`f"{t:.3f}"`: a one-element Tensor formats its value as the Python scalar would; no spec is `str(t)`."""
        if not spec:
            return str(self)
        if self.size != 1:
            raise TypeError(f"unsupported format string {spec!r} for a Tensor of shape {self.shape}: a format spec "
                            f"needs a scalar (a 0-d or one-element Tensor); format t.item() of one, or use str(t)")
        return format(self.item(), spec)

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(f"the truth value of a Tensor with shape {self.shape} is ambiguous; use .any() or .all()")
        return self._concrete(bool, TracerBoolConversionError)

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return self._concrete(int, TracerIntegerConversionError)

    def __index__(self) -> int:
        if not self.dtype.is_int:
            raise TypeError(f"only integer Tensors can be used as an index, got {self.dtype.name}")
        return self._concrete(int, TracerIntegerConversionError)

    def _concrete(self, convert: Callable[[Scalar], Any], error: type[ConcretizationError]) -> Any:
        """`convert` of the value; a traced value's ConcretizationError raised as `error`, the subclass JAX names
        for that conversion (`tgfx.errors`)."""
        try:
            return convert(self.item())
        except ConcretizationError as e:
            raise error(str(e)) from None

    # ---- realising ----
    def realize(self) -> Tensor:
        if self.uop.op is not Ops.BUFFER:
            _realize.realize(self)
        return self

    def block_until_ready(self) -> Tensor:
        """Wait until this Tensor is computed (JAX's name); returns it."""
        u = self.uop
        if u.op is Ops.BUFFER:              # the common case: a computed one-device Tensor
            get_device(u.arg[1]).synchronize()
            return self
        u = _realize.realize(self)[0]
        # (a computed value's device read from its buffer: `.device` is a property to compute on a new node)
        device = u.arg[1] if u.op is Ops.BUFFER else u.src[0].arg[1] if u.op is Ops.RESHAPE and \
            u.src[0].op is Ops.BUFFER else u.device
        for d in (device,) if type(device) is str else device:
            get_device(d).synchronize()
        return self

    def numpy(self) -> np.ndarray:
        """The value as a new numpy array (bfloat16 comes back as float32, numpy has no bfloat16)."""
        u = _realize.realize(self)[0]
        if u.op is Ops.MULTI:  # a sharded Tensor: its parts, joined on the host
            # (a replicated one spanning processes: the replica of this process; "@" names another's device)
            parts = u.src if u.arg is not None else [next((p for p in u.src if "@" not in p.device), u.src[0])]
            host = [copyout(buffer_view(p)).reshape(p.shape) for p in parts]
            if type(u.arg) is tuple:   # blocks over a device grid: each device's block put in place
                from tgfx.transforms.shard import piece_index
                out = np.empty(u.shape, host[0].dtype)
                for i, h in enumerate(host):
                    out[piece_index(u.shape, u.arg, i, len(host))] = h
            else:
                out = host[0] if u.arg is None else np.concatenate(host, axis=u.arg)
        else:   # (`buffer_view`, the shape and the dtype's test read off the nodes: `np.asarray` of each eager result)
            buf = u if u.op is _BUFFER else u.src[0] if u.op is _RESHAPE and u.src[0].op is _BUFFER else None
            assert buf is not None, "realize left a Tensor that is not a buffer"
            out = copyout(buf)
            if u is not buf:
                out = out.reshape(u.arg)
        return bf16_to_f32(out) if u.dtype is dtypes.bfloat16 else out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        try:
            out = self.numpy()
        except ConcretizationError as e:
            raise TracerArrayConversionError(str(e)) from None
        return out if dtype is None else out.astype(dtype)

    def item(self) -> Scalar:
        u = self.uop
        # a computed one-element value (a jitted step's loss, a realised total): its buffer's element, read where it
        # lies (through `size` and `_read_element`'s walk of its view, `float(loss)` cost 5.3 us against JAX's 3.3)
        buf = u if u.op is _BUFFER else u.src[0] if u.op is _RESHAPE and u.src[0].op is _BUFFER else None
        if buf is not None and buf.arg[2] == 1 and buf.dtype is not dtypes.bfloat16 and \
                memory_of(buf) is not None:
            return read_first(buf)
        if self.size != 1:
            raise ValueError(f"item() needs a Tensor with one element, this one has shape {self.shape}")
        if (read := _read_element(self.uop)) is not None:   # an element of a computed buffer: no kernel
            return read
        u = _realize.realize(self)[0]
        if (buf := buffer_view(u)) is not None and buf.dtype != dtypes.bfloat16:   # `numpy()`'s read, without an array
            return read_first(buf)
        return self.numpy().reshape(()).item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    # ---- construction helpers ----
    @staticmethod
    def full(shape: Sequence[int] | int, value: Scalar, dtype: DType | str | None = None,
             device: str | None = None) -> Tensor:
        shape = _shape_arg(shape, "full")
        d = to_dtype(dtype) if dtype is not None else promote_types(scalar_kind(value))
        c = UOp.const(d, value)
        t = Tensor(UOp(Ops.RESHAPE, d, (c,), (1,) * len(shape)) if shape else c)
        t = t.expand(shape) if shape else t
        return t if device is None else t._on(canonical_device(device))

    @staticmethod
    def literal(value: Scalar, dtype: DType | str) -> Tensor:
        """A scalar constant that is part of an algorithm (a hash's rotation amounts, a polynomial's coefficients),
        baked into every kernel as a literal. Other constants of an eager graph are kernel arguments
        (`tgfx/lowering/constants.py`), so a user's value that happens to equal one of these still shares their
        kernels."""
        c = UOp.const(to_dtype(dtype), value)
        return Tensor(c if c.arg in (0, 1) or c.dtype.is_bool else c.replace(tag=LITERAL))

    def _on(self, device: str | tuple[str, ...]) -> Tensor:
        """A constant graph placed on `device` (constants carry no device of their own)."""
        if isinstance(device, tuple):
            return self.to(device)
        if device == DEFAULT_DEVICE or self.uop.device == device:
            return self
        return self.to(device)

    @staticmethod
    def arange(start: Scalar, stop: Scalar | None = None, step: Scalar = 1, dtype: DType | str | None = None) -> Tensor:
        if stop is None:
            start, stop = 0, start
        d = to_dtype(dtype) if dtype is not None else promote_types(*(scalar_kind(v) for v in (start, stop, step)))
        n = max(0, math.ceil((stop - start) / step))
        if not n:
            return Tensor(np.zeros(0, d.np), d)
        if start == 0 and step == 1:   # (exactly the indices: no two ops for an eager argmax to build)
            return _iota(n, d)
        return _iota(n, d) * Tensor._c(step, d) + Tensor._c(start, d)

    @staticmethod
    def _c(v: Scalar, d: DType) -> Tensor:
        return Tensor(UOp.const(d, v))

    # ---- elementwise primitives ----
    def _unary(self, op: Ops, out_dtype: DType | None = None) -> Tensor:
        u = self.uop
        if op in GroupOp.FloatOnly and u.dtype.kind != "f":
            u = self.cast(to_inexact(u.dtype)).uop
        out = Tensor(UOp(op, out_dtype or u.dtype, (u,)))
        return weak(out) if out_dtype is None and _is_weak_tensor(self) else out

    def _binary(self, op: Ops, other: ArrayLike, reflected: bool = False, name: str | None = None,
                float_only: bool = False) -> Tensor:
        a, b = (self, other) if not reflected else (other, self)
        a, b = promote(a, b, name or op.name.lower(), float_only or op in GroupOp.FloatOnly)
        if a.dtype.is_complex and op not in _COMPLEX_BINARY:
            raise TypeError(f"{name or op.name.lower()} is not defined for complex Tensors ({a.dtype.name}); compare "
                            f"or order real(x) and imag(x), or abs(x)")
        src = tuple(broadcast_uops(a, b, name=name or op.name.lower()))   # no Tensor per broadcast operand
        out = Tensor(UOp(op, dtypes.bool if op in GroupOp.Comparison else a.dtype, src))
        # weak when both operands are after promotion (JAX's lax rule, comparisons too): two Python scalars, or an
        # integer Tensor and a Python float (`int8 x * 2.5` is a weak float32)
        return weak(out) if _is_weak_tensor(a) and _is_weak_tensor(b) else out

    def where(self, x: ArrayLike, y: ArrayLike) -> Tensor:
        """`where(self, x, y)`: x where self is true, else y."""
        if type(x) is Tensor and type(y) is Tensor:
            c, xu, yu = self.uop, x.uop, y.uop
            if c.dtype is dtypes.bool and xu.dtype is yu.dtype and xu.shape == yu.shape == c.shape and \
                    xu.device == yu.device == c.device and not _is_weak_tensor(x) and not _is_weak_tensor(y):
                # (a mask and two strongly typed Tensors of one dtype, shape and device, an eager `where(x > 0, x,
                # y)`'s case: the node the steps below build, without their promotion and broadcast tests)
                return Tensor(UOp(Ops.WHERE, xu.dtype, (c, xu, yu)))
        elif (type(x) is Tensor or type(y) is Tensor) and self.uop.dtype is dtypes.bool and \
                (got := fast_operands(x, y)) is not None:
            # (a mask, a Tensor of its shape and device and a Python scalar it keeps its type with, `where(x > 0, x,
            # 0)`: the node the steps below build, the scalar broadcast as they broadcast it)
            xu, yu, d, w = got
            c = self.uop
            if c.shape == xu.shape and c.device == (xu.device if type(x) is Tensor else yu.device):
                out = Tensor(UOp(Ops.WHERE, d, (c, xu, yu)))
                return weak(out) if w else out
        cond = self if self.dtype.is_bool else self != 0
        x, y = promote(x, y, "where")
        out = Tensor(UOp(Ops.WHERE, x.dtype, tuple(broadcast_uops(cond, x, y, name="where"))))
        return weak(out) if _is_weak_tensor(x) and _is_weak_tensor(y) else out   # as a binary op's, x and y weak

    def astype(self, dtype: DType | str | type, copy: bool = False,
               device: str | tuple[str, ...] | None = None) -> Tensor:
        """This Tensor as `dtype`, canonical for the x64 mode (without it, float64 is float32, as `jnp`'s). Complex to
        real takes the real part with numpy's ComplexWarning, as `jnp`'s astype. `copy` and `device` as
        `jax.Array.astype`'s (and numpy's `copy`): Tensors are immutable, so copy=True only makes the result a new
        Tensor when it would be this one; `device` puts the result there, as `x.to(device)`."""
        d = to_dtype(dtype)
        if self.dtype.is_complex and not d.is_complex:
            import warnings
            warnings.warn("Casting complex values to real discards the imaginary part", np.exceptions.ComplexWarning,
                          stacklevel=2)
        out = self.cast(d)
        if out is self and (copy or _is_weak_tensor(self)):
            out = Tensor(out.uop)   # a new Tensor, strongly typed (as JAX's astype of a weak one)
        return out if device is None else out.to(device)

    def cast(self, d: DType) -> Tensor:
        """This Tensor as exactly `d`, whatever the x64 mode: tgfx's own 64-bit arithmetic (a loop's trip count, a
        wide index) uses it; a user's dtype goes through `astype`."""
        return self if d == self.dtype else Tensor(UOp(Ops.CAST, d, (self.uop,)))

    def widened(self, d: DType) -> Tensor:
        """This half float Tensor as `d` (float32) for a dot or a sum to compute in before rounding back: a cast tagged
        `WIDENED`, whose uses reverse mode keeps apart down to the half value (two products of one bfloat16 weight
        summed their float32 cotangents and rounded once, where JAX rounds each product's and adds them in bfloat16:
        1 ulp off jax's gradient in a fifth of the elements)."""
        return Tensor(UOp(Ops.CAST, d, (self.uop,), tag=WIDENED))

    def bitcast(self, dtype: DType | str) -> Tensor:
        d = to_dtype(dtype)
        if d.itemsize != self.dtype.itemsize:
            raise TypeError(f"bitcast from {self.dtype.name} to {d.name} needs equal item sizes "
                            f"({self.dtype.itemsize} vs {d.itemsize} bytes)")
        return self if d == self.dtype else Tensor(UOp(Ops.BITCAST, d, (self.uop,)))

    # ---- movement primitives ----
    def _view(self, u: UOp) -> Tensor:
        """A view of this Tensor (node `u`), weakly typed when it is, as JAX's reshape and slices keep weak_type."""
        out = Tensor(u)
        return weak(out) if _is_weak_tensor(self) else out

    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        one = len(shape) == 1 and not isinstance(shape[0], (int, np.integer))   # a shape, not an axis length
        new = list(_shape_arg(shape[0] if one else shape, "reshape", allow_neg1=True))
        if new.count(-1) > 1:
            raise ValueError(f"reshape: can only infer one dimension (-1), got shape {tuple(new)}")
        if -1 in new:
            known = prod(s for s in new if s != -1)
            if known == 0 or self.size % known:
                raise ShapeError(f"cannot reshape Tensor of shape {self.shape} ({self.size} elements) into "
                                 f"{tuple(new)}")
            new[new.index(-1)] = self.size // known
        new_t = tuple(new)
        if prod(new_t) != self.size:
            raise ShapeError(f"cannot reshape Tensor of shape {self.shape} ({self.size} elements) into shape {new_t} "
                             f"({prod(new_t)} elements)")
        if new_t == self.shape:
            return self
        return self._view(_reshape_uop(self.uop, new_t))

    def permute(self, *axes: int | Sequence[int]) -> Tensor:
        ax = tuple(axes[0]) if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)) else tuple(axes)
        ax = tuple(normalize_axis(a, self.ndim, "transpose") for a in ax)
        if sorted(ax) != list(range(self.ndim)):
            raise ValueError(f"transpose: axes {ax} are not a permutation of the {self.ndim} axes of shape "
                             f"{self.shape}")
        if ax == tuple(range(self.ndim)):
            return self
        return self._view(UOp(Ops.PERMUTE, self.dtype, (self.uop,), ax))

    def expand(self, shape: Sequence[int]) -> Tensor:
        """Broadcast to `shape` (numpy rules: leading axes are added, size-1 axes grow)."""
        shape = tuple(_shape_arg(shape, "broadcast_to"))
        mismatch = any(s != t and s != 1 for s, t in zip(self.shape[::-1], shape[::-1], strict=False))
        if len(shape) < self.ndim or mismatch:
            raise ValueError(f"cannot broadcast Tensor of shape {self.shape} to shape {shape}")
        u = _expand_uop(self.uop, shape)
        return self if u is self.uop else self._view(u)

    def pad_zeros(self, pads: Sequence[tuple[int, int]]) -> Tensor:
        pads = tuple((int(b), int(a)) for b, a in pads)
        if len(pads) != self.ndim or any(b < 0 or a < 0 for b, a in pads):
            raise ValueError(f"pad widths {pads} do not fit a Tensor of shape {self.shape} (one non-negative "
                             f"(before, after) pair per axis)")
        if all(b == 0 and a == 0 for b, a in pads):
            return self
        return self._view(UOp(Ops.PAD, self.dtype, (self.uop,), pads))

    def shrink(self, bounds: Sequence[tuple[int, int]]) -> Tensor:
        bounds = tuple((int(b), int(e)) for b, e in bounds)
        if bounds == tuple((0, s) for s in self.shape):
            return self
        return self._view(UOp(Ops.SHRINK, self.dtype, (self.uop,), bounds))

    def flip(self, axis: int | Sequence[int] | None = None) -> Tensor:
        axes = tuple(range(self.ndim)) if axis is None else normalize_axes(axis, self.ndim, "flip")
        axes = tuple(sorted(a for a in axes if self.shape[a] > 1))
        return self if not axes else self._view(UOp(Ops.FLIP, self.dtype, (self.uop,), axes))

    # ---- reduce primitive ----
    def _reduce(self, op: Ops, axis: int | Sequence[int] | None, keepdims: bool) -> Tensor:
        u = self.uop
        if axis is None and not keepdims and (shape := u.shape) and u.dtype.kind != "c":
            # (every axis of a real Tensor, an eager total's case: the nodes the general path builds, without its
            # axis, shape and reshape steps; the reduce's shape is all ones, never the result's ())
            r = lazy_node(UOp(Ops.REDUCE_AXIS, u.dtype, (u,), (op, tuple(range(len(shape))))))
            if r.op is Ops.RESHAPE:
                return Tensor(_reshape_uop(r, ()))
            total = UOp(Ops.RESHAPE, u.dtype, (r,), ())
            total.__dict__["shape"] = ()   # (as `UOp.shape` computes it: what the next op reads, `sum(x) / n`)
            return Tensor(total)
        axes = normalize_axes(axis, self.ndim, op.name.lower()) if axis is not None else tuple(range(self.ndim))
        out_shape = tuple(s for i, s in enumerate(self.shape) if i not in axes or keepdims) if not keepdims else \
            tuple(1 if i in axes else s for i, s in enumerate(self.shape))
        x = self
        if x.dtype.is_complex and op is not Ops.ADD:
            raise TypeError(f"{op.name.lower()} reduction of a complex Tensor ({x.dtype.name}{list(x.shape)}): complex "
                            f"values have no order; reduce abs(x), real(x) or imag(x)")
        if not axes:   # (a reduction's result is strongly typed, as JAX's, a weak 0-d input's too)
            return x if not _is_weak_tensor(x) else Tensor(x.uop)
        r = UOp(Ops.REDUCE_AXIS, x.dtype, (x.uop,), (op, tuple(sorted(axes))))
        # (the reshape's node built directly: its shape is right by construction, and a Tensor for the reduce and the
        # reshape's tests were a quarter of an eager sum's front end)
        return Tensor(r if keepdims else _reshape_uop(lazy_node(r), out_shape))

    def to(self, device: str | tuple[str, ...]) -> Tensor:
        """This Tensor on `device`, committed there (`tgfx/placement.py`): copied there (gathered, if sharded), weakly
        typed if it is (as `jax.device_put`); a device tuple replicates it."""
        if isinstance(device, (tuple, list)):
            from tgfx.transforms.shard import shard
            return shard(self, device)
        dev = canonical_device(device)
        if dev == self.device and self.uop.device is not None:
            return self if dev != DEFAULT_DEVICE else placement.commit(self)
        out = Tensor(UOp(Ops.COPY, self.dtype, (self.uop,), dev))
        if dev == DEFAULT_DEVICE:
            placement.mark(out.uop)
        return weak(out) if is_weak(self) else out

    @property
    def committed(self) -> bool:
        """Whether this Tensor is committed to its device (placed there by the user, or computed from a value that
        was), as `jax.Array.committed`: ops run where committed operands are, and move uncommitted ones there."""
        return placement.is_committed(self)

    @property
    def sharding(self) -> Any:
        """How this Tensor is laid out, as `jax.Array.sharding`: the `NamedSharding` it was placed with (or one over a
        1-D mesh of its devices), a `SingleDeviceSharding` on one device (`tgfx/sharding.py`)."""
        from tgfx.sharding import sharding_of
        return sharding_of(self)

    @property
    def is_fully_addressable(self) -> bool:
        """Whether this process holds every piece (`jax.Array.is_fully_addressable`): False for a value sharded over
        several processes' devices (`tg.distributed`)."""
        return self.sharding.is_fully_addressable

    @property
    def is_fully_replicated(self) -> bool:
        """Whether every device holds the whole value (`jax.Array.is_fully_replicated`)."""
        return self.sharding.is_fully_replicated

    @property
    def addressable_shards(self) -> list:
        """One `tg.sharding.Shard` (device, index, replica_id, data) per device this Tensor lies on."""
        from tgfx.sharding import addressable_shards
        return addressable_shards(self)

    def devices(self) -> set[str]:
        """The devices this Tensor lies on (`jax.Array.devices()`)."""
        d = self.device
        return {d} if type(d) is str else set(d)

    def contiguous(self) -> Tensor:
        return Tensor(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)))


# the binary ops a complex value has (tgfx/lowering/complex.py writes them on (re, im) pairs)
_COMPLEX_BINARY = frozenset({Ops.ADD, Ops.MUL, Ops.FDIV, Ops.CMPEQ, Ops.CMPNE})


# ---- helpers shared by the numpy surface ----
def _shape_arg(shape: Any, fn: str, allow_neg1: bool = False) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        out = tuple(int(operator_index(s)) for s in shape)
    except TypeError as e:
        raise TypeError(f"{fn}: shape must be a tuple of ints, got {shape!r}") from e
    if any(s < (-1 if allow_neg1 else 0) for s in out):
        raise ValueError(f"{fn}: negative dimensions are not allowed, got shape {out}")
    return out


def operator_index(x: Any) -> int:
    import operator
    return operator.index(x)


def static_int(v: Any) -> int | None:
    """`v` as a Python int when it is a static integer (an int or a numpy integer scalar, not a bool), else None:
    what an axis, a count or a shift may be."""
    return int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) else None


def normalize_axis(a: int, ndim: int, fn: str) -> int:
    try:
        a = operator_index(a)
    except TypeError as e:
        raise TypeError(f"{fn}: axis must be an integer, got {a!r}") from e
    if not -ndim <= a < max(ndim, 0) or ndim == 0 and a not in (0, -1):
        raise np.exceptions.AxisError(f"{fn}: axis {a} is out of bounds for a Tensor of dimension {ndim}")
    return a % ndim if ndim else 0


def normalize_axes(axis: int | Sequence[int], ndim: int, fn: str) -> tuple[int, ...]:
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(normalize_axis(a, ndim, fn) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"{fn}: repeated axis in {tuple(axes)}")
    return out


def _from_host(data: Any, dtype: DType | None, device: str) -> UOp:
    """Copy host data into a new device buffer (numpy's 64-bit types canonical for the x64 mode)."""
    if typed_host(data):   # numpy data, or a buffer (memoryview, array.array): its own element type
        arr = np.asarray(data)
        d = dtype or of_numpy(arr.dtype)
    else:
        arr = np.asarray(data)
        if arr.dtype == object:
            if all(isinstance(v, int) for v in arr.reshape(-1).tolist()):
                check_python_ints(arr, dtype or dtypes.default_int)
            raise TypeError(f"cannot make a Tensor from {type(data).__name__} {data!r}")
        if dtype is None and isinstance(data, (list, tuple)) and (kinds := list_leaf_kinds(data)) is not None:
            d = promote_types(*kinds)   # numpy scalars or arrays among the leaves: JAX's promotion of them
        else:   # Python scalars alone: the default type of their kind
            d = dtype or (dtypes.bool if arr.dtype == np.bool_ else dtypes.default_int if arr.dtype.kind in "iu" else
                          dtypes.default_float if arr.dtype.kind == "f" else
                          dtypes.default_complex if arr.dtype.kind == "c" else from_numpy(arr.dtype))
        if arr.dtype.kind in "iu" and d.is_int:
            check_python_ints(arr, d)
        elif arr.dtype.kind == "f" and d.is_int:
            arr = np.asarray(data, dtype=d.np)   # a Python float out of d's range (or NaN) is an error, as in JAX
    if d == dtypes.bfloat16:
        bits = f32_to_bf16(arr.astype(np.float32)) if arr.dtype != np.uint16 or dtype is None else arr
        host = np.ascontiguousarray(bits)
    else:
        host = np.ascontiguousarray(arr.astype(d.np, copy=False))
    traces = current().traces
    buf, dig = trace_constants.find(data, d, device, host) if traces else (None, b"")
    if buf is None:
        buf = new_buffer(device, host.size, d)
        if host.size:
            copyin(buf, host)
        if dig:   # an array a trace reads: the traces after it read this buffer while it holds the same bytes
            trace_constants.remember(data, d, device, dig, buf)
    for trace in traces:   # made inside a traced function: its constant (see Function._capture_implicit)
        trace.made.add(buf)
    return buf if arr.ndim == 1 else UOp(Ops.RESHAPE, d, (buf,), arr.shape)


def check_python_ints(arr: np.ndarray, d: DType) -> None:
    """Python ints becoming integer type `d` must be values of it: an OverflowError as in JAX, not a wrapped value
    (`tnp.asarray(2**40)` was silently 0). numpy values are the user's typed data and wrap as numpy's astype does."""
    if arr.size == 0 or not d.is_int:
        return
    # (one value, `asarray(step)`'s: itself, not numpy's min and max, two reductions through Python wrappers)
    values = (arr.item(),) if arr.size == 1 else (int(arr.min()), int(arr.max())) if arr.dtype != object else \
        arr.reshape(-1).tolist()
    for v in map(int, values):
        if not fits(v, d):
            from tgfx import config
            hint = "" if config.X64 else " (int64 and uint64 need x64 mode: tgfx.config.update('x64', True))"
            raise OverflowError(f"Python int {v} too large to convert to {d.name}; give a wider dtype{hint} or a "
                                f"float")


def _element_of(u: UOp) -> tuple[UOp, int] | None:
    """The BUFFER and flat element offset that a one-element view `u` (movement ops over a buffer) reads, (None, 0)
    if it reads the zeros of a PAD, or None (a computed value, a sharded one)."""
    idx = [0] * len(u.shape)
    while u.op is not Ops.BUFFER:
        if u.op not in GroupOp.Movement and u.op not in GroupOp.DynamicView:
            return None
        src = u.src[0]
        if u.op in GroupOp.DynamicView:   # eager `x[i]`: its starts are constants
            if any(s.op is not Ops.CONST for s in u.src[1:]):
                return None
            sign = 1 if u.op is Ops.DYNAMIC_SHRINK else -1
            starts = dict(zip(u.arg[0], (sign * s.arg for s in u.src[1:]), strict=True))
            idx = [i + starts.get(a, 0) for a, i in enumerate(idx)]
            if any(not 0 <= i < n for i, n in zip(idx, src.shape, strict=True)):
                return None, 0
        elif u.op is Ops.PAD:
            idx = [i - b for i, (b, _) in zip(idx, u.arg, strict=True)]
            if any(not 0 <= i < n for i, n in zip(idx, src.shape, strict=True)):
                return None, 0
        elif u.op is Ops.RESHAPE:
            flat = 0
            for i, n in zip(idx, u.shape, strict=True):
                flat = flat * n + i
            idx = []
            for n in reversed(src.shape):
                idx.insert(0, flat % n if n else 0)
                flat = flat // n if n else 0
        elif u.op is Ops.SHRINK:
            idx = [i + b for i, (b, _) in zip(idx, u.arg, strict=True)]
        elif u.op is Ops.PERMUTE:
            inv = [0] * len(idx)
            for out_axis, in_axis in enumerate(u.arg):
                inv[in_axis] = idx[out_axis]
            idx = inv
        elif u.op is Ops.EXPAND:
            idx = [0 if n == 1 else i for i, n in zip(idx, src.shape, strict=True)]
        elif u.op is Ops.FLIP:
            idx = [n - 1 - i if a in u.arg else i for a, (i, n) in enumerate(zip(idx, src.shape, strict=True))]
        u = src
    return u, idx[0] if idx else 0


def _read_element(u: UOp) -> Scalar | None:
    """The value of a one-element view of a computed buffer, read from the buffer itself: `float(y[i, j])` in a loop
    copies one element per index instead of compiling a kernel per index (issue #18). None where it is not such a
    view (then the value is computed as usual)."""
    op = u.op
    if op is Ops.RESHAPE and (s := u.src[0].op) is not Ops.BUFFER and s not in GroupOp.Movement and \
            s not in GroupOp.DynamicView:
        return None   # (a computed value in another shape, `sum(x)`'s: no buffer's element to find)
    found = _element_of(u) if op in GroupOp.Movement or op in GroupOp.DynamicView else None
    if found is None or u.dtype == dtypes.bfloat16:
        return None
    buf, off = found
    if buf is None:  # padding
        return False if u.dtype.is_bool else 0 if u.dtype.is_int else 0.0
    mem = memory_of(buf)
    if mem is None:
        return None
    size = buf.dtype.itemsize
    return get_device(buf.arg[1]).allocator.read(mem.part(off * size, size), size).view(buf.dtype.np)[0].item()


def _iota(n: int, d: DType) -> Tensor:
    """0, 1, ..., n-1 as dtype d: the kernel's loop index, no data read."""
    return Tensor(UOp(Ops.IOTA, dtypes.index, (), n)).cast(d)


def to_tensor(x: ArrayLike, like: Tensor | None = None) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float)) and like is not None:
        return Tensor(UOp.const(like.dtype, x))
    t = Tensor(x)
    return weak(t) if weak_input(x) else t   # a Python int, float or complex is weakly typed, as `jnp.asarray(2.0)`


# Python scalars broadcast as operands of Tensors (`x * 2.0`: a CONST, its RESHAPE and EXPAND, negated for
# `x - 2.0`), by dtype, value, shape and negation: an eager loop's `x + 1` built and freed the same three nodes every
# step (a fifth of its time); kept, they are found. Emptied when full (values that change every step fill it).
_broadcasts: dict[tuple, UOp] = {}
BROADCASTS_KEPT = 512


def _scalar_broadcast(x: int | float, d: DType, shape: tuple[int, ...], negate: bool = False) -> UOp:
    """Python scalar `x` as an operand of dtype `d` broadcast to `shape` (`-x` with `negate`), the nodes
    `_expand_uop` makes of its CONST."""
    key = (d, x if x else repr(x), shape, negate)   # (repr: -0.0 is another value than 0.0, and equal to it)
    if (u := _broadcasts.get(key)) is None:
        u = UOp(Ops.CONST, d, (), cast_scalar(x, d))
        u = _expand_uop(UOp(Ops.NEG, d, (u,)) if negate else u, shape)
        if len(_broadcasts) >= BROADCASTS_KEPT:
            _broadcasts.clear()
        _broadcasts[key] = u
    return u


def _scalar_operand(x: Scalar, d: DType, name: str) -> Tensor:
    """Python scalar `x` as an operand of result type `d` (a constant); an int that fits neither the default int
    type nor `d` raises."""
    if type(x) is int and d.is_int and not fits(x, dtypes.default_int) and not fits(x, d):
        raise OverflowError(f"{name}: Python int {x} too large to convert to {dtypes.default_int.name} (the type of a "
                            f"Python int operand, as in JAX) or to the {d.name} operand; pass it as a Tensor of a "
                            f"wider type")
    return Tensor(UOp.const(d, x))


def broadcast_shapes(*shapes: tuple[int, ...], name: str = "broadcast") -> tuple[int, ...]:
    if not shapes:   # (no arrays broadcast to a scalar's shape, as numpy's: `broadcast_arrays()` is [])
        return ()
    if all(s == shapes[0] for s in shapes[1:]):   # (the common case: nothing to broadcast)
        return tuple(shapes[0])
    if len(shapes) == 2 and not (shapes[0] and shapes[1]):   # (the next: a scalar and an array)
        return tuple(shapes[0] or shapes[1])
    nd = max(len(s) for s in shapes)
    padded = [(1,) * (nd - len(s)) + tuple(s) for s in shapes]
    out = []
    for dims in zip(*padded, strict=True):
        big = {d for d in dims if d != 1}
        if len(big) > 1:
            raise ShapeError(f"{name}: operands could not be broadcast together with shapes "
                             f"{' '.join(str(tuple(s)) for s in shapes)}")
        out.append(big.pop() if big else 1)
    return tuple(out)


def on_one_device(ts: Sequence[Tensor], name: str) -> Sequence[Tensor]:
    """Operands of one op on one device (or device tuple): `ts` itself when they are (constants live anywhere), else
    the uncommitted ones moved where the committed ones are (`tgfx/placement.py`; two committed ones on different
    devices raise)."""
    if len(ts) == 2:   # (a binary op: its operands' devices compared without a set)
        da, db = ts[0].uop.device, ts[1].uop.device
        if da is None or db is None or da == db:
            return ts
    if len({t.uop.device for t in ts if t.uop.device is not None}) > 1:
        return placement.place_operands(ts, name)
    return ts


def broadcast(*ts: Tensor, name: str = "broadcast") -> list[Tensor]:
    return [t if u is t.uop else t._view(u) for t, u in zip(ts, broadcast_uops(*ts, name=name), strict=True)]


def broadcast_uops(*ts: Tensor, name: str = "broadcast") -> list[UOp]:
    """The nodes of `ts` broadcast to their common shape (views of their nodes; `broadcast` makes Tensors of them)."""
    ts = on_one_device(ts, name)
    shape = broadcast_shapes(*(t.shape for t in ts), name=name)
    return [t.uop if t.shape == shape else _expand_uop(t.uop, shape) for t in ts]


def _reshape_uop(u: UOp, shape: tuple[int, ...]) -> UOp:
    """`u` (of another shape, the same size) as `shape`: a RESHAPE of what a RESHAPE reshapes, or that itself."""
    src = u.src[0] if u.op is Ops.RESHAPE else u
    return src if src.shape == shape else UOp(Ops.RESHAPE, u.dtype, (src,), shape)


def _expand_uop(u: UOp, shape: tuple[int, ...]) -> UOp:
    """`u` broadcast to `shape` (checked by the caller): leading axes of one added by a RESHAPE (of what a RESHAPE
    reshapes, as `Tensor.reshape` makes it), then an EXPAND. One Tensor for the result, not one per step: eager
    `x * 2` broadcasts its scalar this way."""
    if len(shape) != len(u.shape):
        u = _reshape_uop(u, (1,) * (len(shape) - len(u.shape)) + u.shape)
    return u if u.shape == shape else UOp(Ops.EXPAND, u.dtype, (u,), shape)


# Tensors made from a graph, not (yet) rebound to a buffer: where to look for the siblings of a realised one
_lazy: dict[int, weakref.ref] = {}   # by id (Tensor's == is numpy's), as `_register` keeps them
_lazy_pop = _lazy.pop
_other_threads = getattr(_thread, "_count", lambda: 1)   # (Python threads besides the main one; 1 where unknown)
_get_ident = _thread.get_ident


class ThreadRef(weakref.ref):
    """The `_lazy` entry of a Tensor made while other Python threads ran: `owner`, the thread that made it. Only that
    thread's reads compute it as a sibling (`_realize.siblings`): UOps are hash-consed, so two threads that build the
    same expression (`tnp.sum(shared, axis=0)` of one computed `shared`) hold the same node without sharing anything,
    and another thread's read would otherwise compute the first thread's Tensor (or, past LAZY_DEPTH, any Tensor of
    it that reads the node) in its own schedule: which of a thread's values were stored, so fused how and rounded how,
    then depended on what other threads happened to read meanwhile. A Tensor made while no other thread ran (state set
    up before the threads start) has a plain weakref: everyone's, as before."""

    __slots__ = ("owner",)
# Tensors made as a view of a computed buffer in another shape (`x.reshape(2, 4)`, a jitted call's scalar result): not
# lazy (in `_lazy`, every eager read asked about each of them until one read dropped it), but a donation must leave
# the buffer they view as it is (`_realize.realize_readers`)
_views: dict[int, weakref.ref] = {}
_views_pop = _views.pop
_STORED = frozenset({Ops.BUFFER, Ops.CONST, Ops.PARAM})
# what a Tensor may be a view of another's value through (stripped to find the value: `_realize._view_base`)
_VIEWS = GroupOp.Movement | GroupOp.DynamicView | {Ops.GETTUPLE, Ops.CAST, Ops.BITCAST}
_BUFFER, _RESHAPE = Ops.BUFFER, Ops.RESHAPE
def is_realized(u: UOp) -> bool:
    """A view of a buffer (a BUFFER, or a RESHAPE of one), or a sharded value whose every part is one."""
    if u.op is Ops.MULTI:
        return all(is_realized(p) for p in u.src)
    return u.op is Ops.BUFFER or (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER)


# An eager value whose graph is this many ops deep is computed when it is made, not when it is read: a running mean
# `r = 0.9 * r + 0.1 * loss` read once after 3,000 steps was one fused kernel of 9,000 ops (5 s to compile, and
# different at every length). Each such chain piece is the same graph, so its program is compiled once. A piece's
# compile grows faster than its length: a buffer filled row by row (`buf = buf.at[i].set(row)`), 300 rows on an empty
# compile cache, took 5.5 s with pieces 128 deep, 1.1 s with 64 and 0.43 s with 32 (jax 0.14), each row then
# 0.16 / 0.22 / 0.21 ms.
LAZY_DEPTH = 32


def lazy_node(u: UOp) -> UOp:
    """`u`, or its value computed where its graph is deeper than a lazy Tensor may grow, as a Tensor of it would be:
    for an op built of several nodes without a Tensor for each."""
    return u if lazy_depth(u) <= LAZY_DEPTH else Tensor(u).uop


def lazy_depth(u: UOp) -> int:
    """About the longest path of ops from `u` down to stored values, cached on the nodes: Tensors' graphs have theirs,
    and a source without one (a broadcast constant between two Tensors) counts as one more than its sources'. No
    walk, no recursion: what a new node costs is a few lookups."""
    cache = u.__dict__
    if (d := cache.get("lazy_depth")) is None:
        d = 0
        if u.op not in _STORED:
            for s in u.src:
                if (sd := s.__dict__.get("lazy_depth")) is None:
                    sd = 0
                    for t in s.src:
                        if (td := t.__dict__.get("lazy_depth")) is not None and td > sd:
                            sd = td
                    sd += 1
                if sd >= d:
                    d = sd + 1
        cache["lazy_depth"] = d
    return d


def _differentiating() -> bool:
    return bool(current().differentiating)


# weak types and promotion (`tgfx/_promote.py`) build on Tensor: imported after it, and re-exported
from tgfx._promote import (  # noqa: E402, I001 - before _realize, whose imports read these names
    _int_keeps_type as _int_keeps_type,
    _is_weak_tensor as _is_weak_tensor,
    _register as _register,
    _weak as _weak,
    cast_keeping_weak as cast_keeping_weak,
    fast_binary as fast_binary,
    fast_operands as fast_operands,
    is_weak as is_weak,
    keep_weak as keep_weak,
    promote as promote,
    promotion_kind as promotion_kind,
    weak as weak,
    weak_input as weak_input,
    weak_like as weak_like,
    weak_typed as weak_typed,
)

# computing Tensors builds on them: imported last, its `realize` read when a Tensor is computed
from tgfx import _realize, placement  # noqa: E402
