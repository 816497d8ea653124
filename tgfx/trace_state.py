"""The trace context: which traces and differentiations are running, innermost last (JAX's trace context).

Every transform that runs a user's function on stand-ins enters it here: `@function` and `jit` (their traces),
`vmap` and `tg.lax`'s loops and branches (traces of their bodies), `grad` and its friends (a differentiation).
The front end reads it to decide what a call means: a `jit` called inside any of them is inlined like `@function`,
reading a value is a concretization error only while the trace that owns it runs, and realising inside a
differentiation must not cut the graph the gradient flows through.

The state is one immutable `TraceContext` in a `ContextVar`, so it belongs to the thread (or asyncio task) that
entered it: one thread inside a long trace does not make another thread's eager calls and jit replays behave as if
they were traced. A new thread starts outside every trace.

>>> with tracing("f", {stand_in: "x"}):    # what @function does around the user's function
...     current().traces[-1].name          # 'f'; float() of a value reading stand_in is a ConcretizationError
"""
from __future__ import annotations

import dataclasses
import os
import traceback
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

from tgfx import forksafe
from tgfx.ir.uop import UOp
from tgfx.lowering.inline import EscapedTracerError


class ConcretizationError(TypeError):
    """A traced value was asked for its concrete value (`if x > 0`, `float(x)`, `x.item()`) while tracing (JAX's
    `ConcretizationTypeError`). The subclasses say which conversion asked, under JAX's names (`tgfx.errors`)."""


class TracerBoolConversionError(ConcretizationError):
    """`bool(x)` of a traced value: `if x > 0:`, `while x:`, `x and y`."""


class TracerIntegerConversionError(ConcretizationError):
    """`int(x)` or `operator.index(x)` of a traced value: a traced int used as a Python int (`range(n)`, a list's
    index)."""


class TracerArrayConversionError(ConcretizationError):
    """`np.asarray(x)` of a traced value: a numpy function called on it."""


class NonConcreteBooleanIndexError(ConcretizationError, IndexError):
    """A traced boolean mask as an index (`x[x > 0]`): the result's shape would depend on the mask's values."""


class Effects:
    """The effect chain of one trace (or of a jit's trace as a whole): the effect token of its last host callback
    (`tgfx/callback.py`), which the next one takes as an input, so effects keep program order and are never merged
    by hash-consing; None before the first. `start` is the token the chain began from (a stand-in for the caller's
    chain in a function or loop body), so `token is not start` says whether anything happened."""

    __slots__ = ("token", "start")

    def __init__(self, start: UOp | None = None) -> None:
        self.token: UOp | None = start
        self.start = start

    @property
    def happened(self) -> bool:
        return self.token is not self.start


@dataclasses.dataclass(frozen=True)
class Trace:
    """One running trace: the function's name and what each of its stand-in PARAMs stands for."""
    name: str
    described: Mapping[UOp, str]  # PARAM -> the argument it stands for ("x", "params['w']", "loop index")
    # BUFFERs of host data the function made while running (`tnp.asarray(2.5)`): constants of its body, not values
    # it captured from outside
    made: set[UOp] = dataclasses.field(default_factory=set, compare=False)
    # the host callbacks it ran, as a chain of effect tokens
    effects: Effects = dataclasses.field(default_factory=Effects, compare=False)
    # the functions `tg.checkpoint` ran inside it (or inside a trace within it): a loop whose body calls one
    # recomputes the body's forward in its backward, keeping nothing but the carries
    checkpointed: set[str] = dataclasses.field(default_factory=set, compare=False)
    # the arguments its stand-in PARAMs stand for, where the function may read their values (a custom_jvp's function
    # called eagerly under grad: JAX runs it on concrete values, so `if x > 0` in it works); empty elsewhere
    values: Mapping[UOp, UOp] = dataclasses.field(default_factory=dict, compare=False)


@dataclasses.dataclass(frozen=True)
class TraceContext:
    traces: tuple[Trace, ...] = ()         # @function / jit / vmap / lax bodies running their function, innermost last
    differentiating: tuple[str, ...] = ()  # grad, vjp, jvp, ... running their function, innermost last

    @property
    def active(self) -> bool:
        """Inside any trace or differentiation: a jit call there is part of the caller's graph."""
        return bool(self.traces or self.differentiating)


# the default is shared by every thread: TraceContext is frozen, and entering a trace sets a new one
_IDLE = TraceContext()
_context: ContextVar[TraceContext] = ContextVar("tgfx_trace_context", default=_IDLE)  # noqa: B039


# `current()`: this context's TraceContext (the variable's own `get`: every eager read asks)
current: Callable[[], TraceContext] = _context.get


def active() -> bool:
    """`current().active`, at the cost of one lookup (jit's replay path asks on every call): a context is only ever
    entered with a trace or a differentiation in it, so any but the idle one is active."""
    return _context.get() is not _IDLE


@contextmanager
def _entered(ctx: TraceContext, value: Any = None) -> Iterator[Any]:
    token = _context.set(ctx)
    try:
        yield value
    finally:
        _context.reset(token)


def tracing(name: str, described: Mapping[UOp, str], token: UOp | None = None,
            values: Mapping[UOp, UOp] | None = None) -> AbstractContextManager[Trace]:
    """Run a function on stand-ins named `name`; reading a PARAM in `described` inside is a concretization error,
    unless `values` gives the argument it stands for (then it reads that argument's value). `token`: the effect token
    its host callbacks start their chain from (a stand-in for the caller's). Entered, it gives the Trace (what the
    function made, its effect chain)."""
    ctx = _context.get()
    trace = Trace(name, MappingProxyType(dict(described)), effects=Effects(token),
                  values=MappingProxyType(dict(values or {})))
    return _entered(dataclasses.replace(ctx, traces=(*ctx.traces, trace)), trace)


# the effect chain of a jit's trace as a whole (`collecting_effects`), where the function it traces has no trace
# around it
_collector: ContextVar[Effects | None] = ContextVar("tgfx_effects", default=None)


def effect_chain() -> Effects | None:
    """The effect chain a host callback made here joins: the innermost trace's, else a jit's collecting one; None
    outside every trace (an eager callback runs at once)."""
    ctx = _context.get()
    return ctx.traces[-1].effects if ctx.traces else _collector.get()


@contextmanager
def collecting_effects() -> Iterator[Effects]:
    """Collect the effects of the functions called inside (none running around them) in one chain: what `jit` keeps
    as one more root of its program, so its callbacks run at every replay."""
    fx = Effects()
    token = _collector.set(fx)
    try:
        yield fx
    finally:
        _collector.reset(token)


def differentiating(who: str) -> AbstractContextManager[None]:
    """Run a function whose graph is being differentiated by `who` (grad, vjp, jvp, ...)."""
    ctx = _context.get()
    return _entered(dataclasses.replace(ctx, differentiating=(*ctx.differentiating, who)))


# ---- which function a PARAM belongs to, for the escaped-tracer message ----
# PARAMs are hash-consed (PARAM(0) of a float32[3] is one node for every function), so this names the function that
# last traced it. Written when a trace makes its stand-ins and read only to word an error, so a weak map is enough;
# the lock keeps a write racing the map's removal of a collected key (which runs on whichever thread frees it) safe
# without relying on the GIL's atomicity of dict operations.
_param_owner: weakref.WeakKeyDictionary[UOp, str] = weakref.WeakKeyDictionary()
_owner_lock = forksafe.lock()


def record_owner(params: list[UOp] | tuple[UOp, ...], name: str) -> None:
    with _owner_lock:
        for p in params:
            _param_owner[p] = name


def param_owner(param: UOp) -> str:
    with _owner_lock:
        return _param_owner.get(param, "<unknown function>")


# ---- the user's errors for a PARAM that reached the lowering ----
def _user_line() -> str:
    """The innermost stack frame outside tgfx: the user's line that asked for a value."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    for fr in reversed(traceback.extract_stack()):
        if not os.path.abspath(fr.filename).startswith(pkg):
            return f"{fr.filename}:{fr.lineno} `{(fr.line or '').strip()}`"
    return "<unknown>"


def concretization_error(param: UOp) -> ConcretizationError | None:
    """The error for reading `param`'s value while a trace of this context that owns it runs (None if none does)."""
    for tr in reversed(_context.get().traces):
        if param in tr.described:
            return ConcretizationError(
                f"{tr.name}: the value of argument {tr.described[param]} ({param.dtype.name}{list(param.arg[1])}) is "
                f"not known while tracing, but was needed at {_user_line()}. Control flow on traced values "
                f"(`if x > 0`, `float(x)`, `x.item()`, `np.asarray(x)`) cannot be traced: use tnp.where, or mark the "
                f"argument static (jit(f, static_argnums=...)) so each value gets its own trace")
    return None


def argument_values(params: Sequence[UOp]) -> dict[UOp, UOp] | None:
    """The arguments `params` stand for, when each is a stand-in of a running trace that may read its values (see
    `Trace.values`); None when one is not."""
    found = {}
    for p in params:
        for tr in reversed(_context.get().traces):
            if p in tr.values:
                found[p] = tr.values[p]
                break
        else:
            return None
    return found


def user_error(err: EscapedTracerError) -> Exception:
    """The error a user sees for the PARAMs the lowering met outside any function: a concretization error if a trace
    running in this context owns one (its value was read inside the function), else the escaped tracer, named by the
    function that made it."""
    for p in err.params:
        if (c := concretization_error(p)) is not None:
            return c
    p = err.params[0]
    return EscapedTracerError(
        f"a traced value of function {param_owner(p)} (argument slot {p.arg[0]}, {p.dtype.name}{list(p.arg[1])}) was "
        f"used after the function returned; return it from the function instead of storing it", err.params)
