"""Host callbacks: `tg.debug.print`, `tg.debug.callback`, `tg.pure_callback` and `tg.io_callback`, as JAX's.

A callback is a node of the graph like a custom kernel: `CALL(CALLBACK(HostCallback), [token], *args)`, whose
results are its `GETTUPLE`s. Its first result is an *effect token* (a bool scalar nothing reads): a callback with a
side effect (debug.print, debug.callback, io_callback) takes the token of the previous one in its trace as an input
and hands its own to the next (`trace_state.Effects`), so

- effects run in program order (the schedule orders commands by their dependences, and the chain is one),
- two equal prints are two nodes (the second reads the first's token: hash-consing cannot merge them),
- a print whose result nothing reads still runs: the chain's last token is a root of whatever runs the trace. A
  `@function` (and `jit` inlined in a trace) returns it as a hidden result that joins its caller's chain, a body
  takes its caller's token as a hidden argument; a `tg.lax` loop carries it from step to step, a branch passes it
  through; `vmap` batches the chain with the rest of the graph; `jit` makes it one more root of its program;
  outside every trace the callback runs at once.

`pure_callback` has no token: a pure computation that the graph may drop when unused, and may merge when equal.

The scheduler turns the CALL into a LINEAR command (results, [token], args) that the device's command processor runs
as a host program (`EXEC_HOST_FN`, `tgfx/devices/hcq.py` `Program` of a Python function) between the kernels around
it, inside device loops too, with no host round trip: the processor's thread takes the GIL, reads the arguments'
memory as numpy arrays (copied: the memory is reused once the callback returns), calls the user's function and writes
its results into the result buffers. An exception there is recorded by the processor and raised on the host as an
`HCQExecError` naming the callback (its `__cause__` the user's exception) at the next synchronisation (an eager
callback synchronises at once).

>>> tg.debug.print("step {i}: loss {loss:.3f}", i=i, loss=loss)       # inside jit, scan bodies, vmap, grad ...
>>> tg.pure_callback(lambda x: scipy.special.j0(x), tg.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="sequential")
"""
from __future__ import annotations

import ctypes
import functools
import itertools
import string
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tgfx import config
from tgfx._realize import realize
from tgfx.devices import DEFAULT_DEVICE, get_device
from tgfx.devices.programs import Program, running_callback
from tgfx.dtypes import DType, bf16_to_f32, dtypes, f32_to_bf16, host_np, to_dtype
from tgfx.function import is_grad_input
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp, prod
from tgfx.lowering.lru import LRU
from tgfx.tensor import Tensor, to_tensor
from tgfx.trace_state import current, effect_chain
from tgfx.tree import tree_flatten, tree_unflatten

TOKEN = dtypes.bool   # an effect token: a bool scalar that orders callbacks; no command reads its value
VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all", "legacy_vectorized")

_uid = itertools.count(1)
Aval = tuple[tuple[int, ...], DType]


class HostCallback:
    """A Python function the command processor runs between kernels: the arg of a CALLBACK node.

    Args:
        name: what errors, profiles and DEBUG output call it (`debug.print('x={x}')`, `pure_callback(f)`).
        fn: `fn(args) -> results`, each a list of numpy arrays (the results of the shapes and dtypes of `outs`; a
            callback without results returns anything, which is ignored).
        ins: (shape, dtype) of each argument.
        outs: (shape, dtype) of each result (the effect token not counted).
        effect: whether it has a side effect (joins the effect chain), or is pure.
        vmap_method: how `vmap` batches it (`VMAP_METHODS`; None: an error, as JAX's pure_callback).

    Equal only to itself (its repr holds a process-unique number): graphs with different callbacks never share a
    schedule.
    """

    def __init__(self, name: str, fn: Callable[[list[np.ndarray]], Any], ins: Sequence[Aval], outs: Sequence[Aval],
                 effect: bool, vmap_method: str | None = "sequential") -> None:
        self.name, self.fn, self.effect, self.vmap_method = name, fn, effect, vmap_method
        self.ins, self.outs = tuple(ins), tuple(outs)
        self.uid = next(_uid)
        # whether its results may be 64-bit for a 32-bit declaration (JAX's canonical types without x64): the mode of
        # the trace, not of the device thread that runs it (which sees only the process-wide value)
        self.narrows = not config.X64
        self._programs: dict[bool, Program] = {}
        self.runs = 0

    def __repr__(self) -> str:
        return f"HostCallback({self.name!r}, #{self.uid})"

    def program(self, chained: bool) -> Program:
        """The host program an EXEC of it runs, with its buffers (results, [token] when `chained`, arguments)."""
        prog = self._programs.get(chained)
        if prog is None:
            prog = self._programs[chained] = Program(f"callback {self.name}", functools.partial(self._run, chained))
            # what a device whose memory the host cannot read copies in and out around the call (CUDA's)
            tokens = (TOKEN.itemsize,) * (1 + int(chained))
            prog.host_buffers = (tokens[0], *(prod(s) * d.itemsize for s, d in self.outs), *tokens[1:],
                                 *(prod(s) * d.itemsize for s, d in self.ins))
            prog.host_writes = 1 + len(self.outs)
        return prog

    def _run(self, chained: bool, bufs_addr: int, vals_addr: int, core: int) -> None:
        """The EXEC body, on the processor's thread with the GIL: arguments in, the user's function, results out."""
        n_out = 1 + len(self.outs)
        first_in = n_out + int(chained)
        ptrs = (ctypes.c_uint64 * (first_in + len(self.ins))).from_address(bufs_addr)
        args = [_read(int(ptrs[first_in + i]), shape, dtype) for i, (shape, dtype) in enumerate(self.ins)]
        with running_callback(self.name):
            got = self.fn(args)
        self.runs += 1
        if not self.outs:
            return
        results = _check_results(self.name, got, self.outs, self.narrows)
        for i, (r, (shape, dtype)) in enumerate(zip(results, self.outs, strict=True)):
            _write(int(ptrs[1 + i]), r, shape, dtype)

    def batched(self, size: int, flags: Sequence[bool]) -> HostCallback:
        """This callback under `vmap` with a batch of `size`, the arguments with `flags` batched (axis 0): each result
        gains the batch axis in front. `sequential`: one call per example, in order; `expand_dims`: one call, an
        unbatched argument with a unit axis in front; `broadcast_all`: one call, every argument of the batch's size."""
        method = self.vmap_method
        if method is None:
            raise NotImplementedError(
                f"vmap of {self.name}: vmap is only supported for pure_callback when vmap_method is one of "
                f"{', '.join(repr(m) for m in VMAP_METHODS)}. Got vmap_method=None; pass one, e.g. "
                f"vmap_method='sequential' to call it once per example")
        fn, outs, narrows = self.fn, self.outs, self.narrows

        def sequential(args: list[np.ndarray]) -> list[np.ndarray] | None:
            per = [fn([a[b] if f else a for a, f in zip(args, flags, strict=True)]) for b in range(size)]
            if not outs:
                return None
            checked = [_check_results(self.name, r, outs, narrows) for r in per]
            return [np.stack([c[i] for c in checked]) if size else np.zeros((0, *s), d.np)
                    for i, (s, d) in enumerate(outs)]

        def vectorized(args: list[np.ndarray]) -> Any:
            if method == "broadcast_all":
                args = [a if f else np.broadcast_to(a, (size, *a.shape)) for a, f in zip(args, flags, strict=True)]
            else:
                args = [a if f else a[None] for a, f in zip(args, flags, strict=True)]
            return fn(args)
        ins = [((size, *s), d) if f else (s, d) for (s, d), f in zip(self.ins, flags, strict=True)]
        one = method in ("sequential", "sequential_unrolled")
        out = HostCallback(self.name, sequential if one else vectorized, ins, [((size, *s), d) for s, d in outs],
                           self.effect, method)
        out.narrows = narrows
        return out


def _read(ptr: int, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """A copy of the device memory at `ptr` as a numpy array (bfloat16 as float32, as `Tensor.numpy`)."""
    n = prod(shape)
    if n == 0:
        return np.zeros(shape, host_np(dtype))
    raw = np.ctypeslib.as_array((ctypes.c_char * (n * dtype.itemsize)).from_address(ptr)).view(dtype.np)
    out = raw.reshape(shape).copy()
    return bf16_to_f32(out) if dtype == dtypes.bfloat16 else out


def _write(ptr: int, value: np.ndarray, shape: tuple[int, ...], dtype: DType) -> None:
    n = prod(shape)
    if n == 0:
        return
    dst = np.ctypeslib.as_array((ctypes.c_char * (n * dtype.itemsize)).from_address(ptr)).view(dtype.np)
    dst[:] = (f32_to_bf16(value.astype(np.float32)) if dtype == dtypes.bfloat16 else value).reshape(-1)


# 64-bit results where the expected type is the 32-bit one JAX makes of them without x64 (numpy's default float64 of
# `np.sin(x)`... for a float32 x it is float32, but `np.float64(1.5)` or a Python float is not)
_NARROWED = {np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.int64): np.dtype(np.int32),
             np.dtype(np.uint64): np.dtype(np.uint32), np.dtype(np.complex128): np.dtype(np.complex64)}


def _check_results(name: str, got: Any, outs: Sequence[Aval], narrows: bool) -> list[np.ndarray]:
    """The results a user's callback returned (flattened to match `outs`), checked against the declared shapes and
    dtypes (a 64-bit one for its 32-bit declaration too if it `narrows`); an error naming the callback, the result
    and both types."""
    leaves, _ = tree_flatten(got)
    if len(leaves) != len(outs):
        raise RuntimeError(f"{name} returned {len(leaves)} value(s), but result_shape_dtypes declares {len(outs)}")
    out = []
    for i, (leaf, (shape, dtype)) in enumerate(zip(leaves, outs, strict=True)):
        a = np.asarray(leaf)
        want = host_np(dtype)
        if a.shape != tuple(shape):
            raise RuntimeError(f"{name}: incorrect output shape for return value #{i}: expected {tuple(shape)}, "
                               f"actual {a.shape} (result_shape_dtypes declares {dtype.name}{list(shape)})")
        if a.dtype != want and not (narrows and _NARROWED.get(a.dtype) == want):
            raise RuntimeError(f"{name}: incorrect output dtype for return value #{i}: expected {want.name}, actual "
                               f"{a.dtype.name}; return arrays of the declared dtype (e.g. .astype(np.{want.name}))")
        out.append(a.astype(want, copy=False))
    return out


# ---- building the node ----
def _call(hc: HostCallback, args: list[Tensor], device: str) -> tuple[UOp, list[Tensor]]:
    """The CALL of `hc` on `args`, chained after the effect chain's last token when it has an effect; its token and
    its result Tensors. The chain's token becomes this call's."""
    chain = effect_chain() if hc.effect else None
    prev = chain.token if chain is not None else None
    spec = (((), TOKEN, device), *((s, d, device) for s, d in hc.outs))
    src = (UOp(Ops.CALLBACK, None, (), hc), *(() if prev is None else (prev,)), *(t.uop for t in args))
    call = UOp(Ops.CALL, None, src, (hc.name, None, spec, prev is not None))
    token = UOp(Ops.GETTUPLE, TOKEN, (call,), 0)
    results = [Tensor(UOp(Ops.GETTUPLE, d, (call,), 1 + i)) for i, (_, d) in enumerate(hc.outs)]
    return token, results


def _primal(token: UOp) -> UOp:
    """`token` reading the values being differentiated, not the differentiation's placeholders for them (the same
    values): the chain leaves the differentiation, which gives its placeholders no meaning outside (a callback has no
    effect on gradients, as JAX's debug callbacks)."""
    if not current().differentiating:
        return token
    while inputs := {u: u.src[0] for u in token.toposort() if is_grad_input(u)}:
        token = token.substitute(inputs)
    return token


def deliver(token: UOp, results: Sequence[Tensor] = ()) -> None:
    """Hand the effect token of something that ran callbacks to the chain it joins: the running trace's (or jit's),
    or, outside every trace, run it now with `results` (computed in the same schedule, so the callbacks run once) and
    wait, so an eager callback has run, or raised, when the call returns."""
    chain = effect_chain()
    if chain is not None:
        chain.token = _primal(token)
        return
    t = Tensor(token)
    realize(t, *results)
    get_device(token.device or DEFAULT_DEVICE).synchronize()


def chain_token(device: str) -> Tensor:
    """The effect token a loop or branch on `device` starts its callbacks' chain from: the chain's last one here, or a
    new one (a constant) where none is, or it lies on another device."""
    chain = effect_chain()
    if chain is not None and chain.token is not None and chain.token.device == device:
        return Tensor(chain.token)
    return Tensor.full((), False, TOKEN, device=device)


def _device_of(args: list[Tensor]) -> str:
    devices = {t.device for t in args}
    if len(devices) > 1 or any(not isinstance(d, str) for d in devices):
        raise ValueError(f"a host callback's array arguments must be on one device, got {sorted(map(str, devices))}; "
                         f"move them to one first (Tensor.to)")
    return devices.pop() if devices else DEFAULT_DEVICE


# callbacks by what defines them, so an eager loop calling the same one reuses its schedule
_interned: LRU[tuple, HostCallback] = LRU(lambda: 256)


def _callback(key: tuple | None, make: Callable[[], HostCallback]) -> HostCallback:
    if key is None:
        return make()
    try:
        hit = _interned.get(key)
    except TypeError:   # an unhashable static argument
        return make()
    if hit is None:
        hit = _interned.setdefault(key, make())
    return hit


def _split_args(args: Any) -> tuple[list[Any], Any, list[int]]:
    """Array leaves (Tensors, numpy arrays) of a pytree become the callback's arguments; other leaves stay Python
    values. Returns (leaves, treedef, positions of the array leaves)."""
    leaves, tree = tree_flatten(args)
    at = [i for i, x in enumerate(leaves) if isinstance(x, Tensor | np.ndarray | np.generic)]
    return leaves, tree, at


def _flat_callback(name: str, callback: Callable, args: tuple, kwargs: dict, outs: list[Aval], effect: bool,
                   vmap_method: str | None, key: tuple | None) -> tuple[UOp, list[Tensor]]:
    """The CALL of `callback(*args, **kwargs)` with its array leaves as arguments."""
    leaves, tree, at = _split_args((args, kwargs))
    tensors = [to_tensor(leaves[i]) for i in at]
    device = _device_of(tensors)
    static = [None if i in set(at) else x for i, x in enumerate(leaves)]

    def fn(arrays: list[np.ndarray]) -> Any:
        full = list(static)
        for i, a in zip(at, arrays, strict=True):
            full[i] = a
        a, kw = tree_unflatten(tree, full)
        return callback(*a, **kw)
    ins = [(t.shape, t.dtype) for t in tensors]
    statics = tuple((type(x), x) for x in static if x is not None)
    hc = _callback(None if key is None else (*key, tree, tuple(at), statics, tuple(ins), tuple(outs), vmap_method,
                                             bool(config.X64)),
                   lambda: HostCallback(name, fn, ins, outs, effect, vmap_method))
    return _call(hc, tensors, device)


def _fn_name(f: Callable) -> str:
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or type(f).__qualname__


# ---- the public functions ----
def debug_callback(callback: Callable[..., Any], *args: Any, ordered: bool = False, **kwargs: Any) -> None:
    """Call `callback(*args, **kwargs)` on the host with the arguments' values (`jax.debug.callback`), eagerly, at
    every run of a jitted function, once per step of a `tg.lax` loop, with primal values under `grad` (no effect on
    gradients), and once per example under `vmap` (in order, as JAX 0.10's). Array leaves arrive as numpy arrays
    (copies; JAX passes jax.Arrays); its return value is ignored. Callbacks of one program run in program order
    (`ordered` is accepted for JAX's signature: they always are).

    >>> tg.debug.callback(lambda x: losses.append(float(x)), loss)
    """
    del ordered
    token, _ = _flat_callback(f"debug.callback({_fn_name(callback)})", callback, args, kwargs, [], True,
                              "sequential", ("debug.callback", callback))
    deliver(token)


def debug_print(fmt: str, *args: Any, ordered: bool = False, **kwargs: Any) -> None:
    """Print `fmt.format(*args, **kwargs)` with the arguments' values (`jax.debug.print`), when the computation runs:
    eagerly, at every run of a jitted function (not only when it is traced), once per step of a loop, once per
    example under `vmap`, with primal values under `grad`. Prints of one program appear in program order.

    >>> tg.debug.print("x={x} y={}", y, x=x)        # str.format on numpy values
    """
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print: the format must be a str, got {type(fmt).__name__}")
    del ordered

    def show(*a: Any, **kw: Any) -> None:
        sys.stdout.write(string.Formatter().format(fmt, *a, **kw) + "\n")
        sys.stdout.flush()
    short = fmt if len(fmt) <= 40 else fmt[:37] + "..."
    token, _ = _flat_callback(f"debug.print({short!r})", show, args, kwargs, [], True, "sequential",
                              ("debug.print", fmt))
    deliver(token)


def _result_avals(who: str, result_shape_dtypes: Any) -> tuple[list[Aval], Any]:
    leaves, tree = tree_flatten(result_shape_dtypes)
    avals = []
    for x in leaves:
        shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
        if shape is None or dtype is None:
            raise TypeError(f"{who}: result_shape_dtypes must be a pytree of objects with .shape and .dtype (such as "
                            f"tg.ShapeDtypeStruct), got a {type(x).__name__}")
        avals.append((tuple(int(d) for d in shape), to_dtype(dtype)))
    return avals, tree


def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                  vmap_method: str | None = None, sharding: Any = None, **kwargs: Any) -> Any:
    """Call a pure host function from traced code (`jax.pure_callback`): `callback(*args, **kwargs)` on numpy values,
    returning arrays of the shapes and dtypes of `result_shape_dtypes` (a pytree of `tg.ShapeDtypeStruct` or
    anything with .shape and .dtype), which come back as Tensors in that structure. A result of another shape or
    dtype is an error naming the callback and both types.

    Pure: a call whose results are unused may be dropped, and equal calls merged. Under `vmap`, `vmap_method` says
    how: "sequential" calls it once per example, "expand_dims" once with a unit batch axis on unbatched arguments,
    "broadcast_all" once with every argument broadcast to the batch; None (the default) is an error, as in JAX. It
    has no derivative: `grad` through it is an error unless it is wrapped in `tg.custom_jvp` / `tg.custom_vjp`.

    >>> tg.pure_callback(lambda x: np.sinc(x), tg.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="sequential")
    """
    del sharding
    if vmap_method is not None and vmap_method not in VMAP_METHODS:
        raise ValueError(f"pure_callback: vmap_method must be one of {VMAP_METHODS} or None, got {vmap_method!r}")
    avals, tree = _result_avals("pure_callback", result_shape_dtypes)
    token, results = _flat_callback(f"pure_callback({_fn_name(callback)})", callback, args, kwargs, avals, False,
                                    vmap_method, ("pure_callback", callback))
    if effect_chain() is None and results:   # eager: run now, so its errors are raised at the call
        realize(*results)
        get_device(results[0].device).synchronize()
    return tree_unflatten(tree, results)


def io_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any, ordered: bool = False,
                sharding: Any = None, **kwargs: Any) -> Any:
    """Call a host function with side effects from traced code (`jax.experimental.io_callback`): as `pure_callback`,
    but never dropped nor merged, in program order with the other effects (so `ordered` changes nothing), and
    `vmap` calls it once per example. `result_shape_dtypes` may be None for no result."""
    del ordered, sharding
    avals, tree = _result_avals("io_callback", result_shape_dtypes)
    token, results = _flat_callback(f"io_callback({_fn_name(callback)})", callback, args, kwargs, avals, True,
                                    "sequential", ("io_callback", callback))
    deliver(token, results)
    return tree_unflatten(tree, results)


def is_callback(call: UOp) -> bool:
    """Whether `call` is the CALL of a host callback."""
    return call.op is Ops.CALL and call.src[0].op is Ops.CALLBACK


__all__ = ["HostCallback", "debug_print", "debug_callback", "pure_callback", "io_callback", "deliver", "is_callback",
           "chain_token", "TOKEN"]
