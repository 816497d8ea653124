"""`make_jaxpr`: the traced graph of a function, printed the way `jax.make_jaxpr` prints a jaxpr.

The function is traced exactly as `tg.jit` traces it (through `@function`: every Tensor leaf of the arguments, and
every numpy array, becomes a PARAM; Python scalars and static arguments are baked in), and the body of the resulting
FUNCTION is listed in topological order, one equation per UOp. Nothing runs: no kernel is compiled or executed.

>>> import numpy as np, tgfx as tg, tgfx.numpy as tnp
>>> print(tg.make_jaxpr(lambda x, y: tnp.sum(tnp.sin(x) * y))(np.ones(3, np.float32), np.ones(3, np.float32)))
{ lambda ; a:f32[3] b:f32[3]. let
    c:f32[3] = sin a
    d:f32[3] = mul c b
    e:f32[1] = reduce_sum[axes=(0,)] d
    f:f32[] = reshape[shape=()] e
  in (f,) }

How UOps read as equations:
- a PARAM is an input variable; Tensors the function captured from a closure are `constvars`, listed before the `;`
  (as JAX lists a closed jaxpr's constants);
- a constant (a CONST, seen through reshapes and expands) is written inline as a literal (`mul c 2.0`) where an
  elementwise op reads it, and as `broadcast[shape=...] 2.0` where something else needs its full shape;
- ops are their names lowercased, with the arguments that matter in brackets (`reshape[shape=(3, 1)]`,
  `permute[axes=(1, 0)]`); `REDUCE_AXIS` is `reduce_sum` / `reduce_max` / `reduce_prod`;
- a FUNCTION, CALL, LOOP or SWITCH binds all its results at once (`c:f32[3] d:i64[] = loop[...] a b`) and prints
  its bodies indented under it (`body={ lambda ; ... }`), with variable names that continue the outer ones.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tgfx.dtypes import DType
from tgfx.function import Function
from tgfx.ir.control import INDEX_DTYPE, loop_results, n_bodies, n_results
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.multi import device_parts
from tgfx.tensor import Tensor
from tgfx.tree import tree_flatten, tree_unflatten

Shape = tuple[int, ...]

_SHORT = {"bool": "bool", "bfloat16": "bf16"}
_REDUCE = {Ops.ADD: "reduce_sum", Ops.MAX: "reduce_max", Ops.MUL: "reduce_prod"}
_CONST_VIEWS = GroupOp.Movement - {Ops.PAD}   # a constant seen through these is still one value everywhere
_CALLS = frozenset({Ops.FUNCTION, Ops.CALL, Ops.LOOP, Ops.SWITCH})


def type_str(shape: Shape, dtype: DType | None) -> str:
    """JAX's short form of a type: `f32[3,4]`, `i32[]`, `bool[2]`."""
    if dtype is None:
        return "?"
    short = _SHORT.get(dtype.name) or f"{dtype.kind if dtype.kind != 'b' else 'bool'}{dtype.bits}"
    return f"{short}[{','.join(str(s) for s in shape)}]"


@dataclass(frozen=True)
class Var:
    """A variable of the printout: a name and the type of the value it holds."""

    name: str
    shape: Shape
    dtype: DType | None

    def __str__(self) -> str:
        return self.name

    @property
    def typed(self) -> str:
        return f"{self.name}:{type_str(self.shape, self.dtype)}"


@dataclass(frozen=True)
class Literal:
    """A constant operand, written inline."""

    value: Any
    dtype: DType | None

    def __str__(self) -> str:
        v = self.value
        if isinstance(v, float) and not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        return repr(v)


Atom = Var | Literal


@dataclass(frozen=True)
class Eqn:
    """One UOp: `outvars = primitive[params] invars`, with the bodies of a call or loop (name -> Jaxpr)."""

    primitive: str
    params: dict[str, Any]
    invars: tuple[Atom, ...]
    outvars: tuple[Var, ...]
    uop: UOp
    bodies: tuple[tuple[str, Jaxpr], ...] = ()


@dataclass(frozen=True)
class Jaxpr:
    """A traced function as equations. `str()` is the printout; the fields are there to inspect it in code.

    constvars: the Tensors the function captured from a closure (their values are `consts`), invars: its inputs, one
    per Tensor leaf of the arguments (one per device part of a sharded one), outvars: its results (variables or
    literals), eqns: the equations in topological order; `uop` is the traced FUNCTION itself.
    """

    constvars: tuple[Var, ...]
    invars: tuple[Var, ...]
    outvars: tuple[Atom, ...]
    eqns: tuple[Eqn, ...]
    uop: UOp | None = None
    consts: tuple[Tensor, ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        return "\n".join(_format(self, 0))

    def __repr__(self) -> str:
        return str(self)

    def pretty_print(self) -> str:
        """The printout (JAX's name for it)."""
        return str(self)


# ---- building: one scope per body, one name counter for the whole printout ----
def _var_name(n: int) -> str:
    """a, b, ..., z, ba, bb, ...: JAX's variable names."""
    s = ""
    while not s or n:
        n, i = divmod(n, 26)
        s += chr(ord("a") + i)
    return s[::-1]


def _scope_children(u: UOp) -> tuple[UOp, ...]:
    """The sources of `u` that belong to the same body: a call's or loop's own bodies are printed as bodies."""
    if u.op is Ops.FUNCTION:
        return u.src[1:]
    return u.src[n_bodies(u):]


def _is_const_view(u: UOp) -> bool:
    while u.op in _CONST_VIEWS:
        u = u.src[0]
    return u.op is Ops.CONST


def _const_value(u: UOp) -> Any:
    while u.op is not Ops.CONST:
        u = u.src[0]
    return u.arg


class _Builder:
    def __init__(self) -> None:
        self.count = 0

    def var(self, shape: Shape | None, dtype: DType | None) -> Var:
        v = Var(_var_name(self.count), tuple(shape or ()), dtype)
        self.count += 1
        return v

    def body(self, body: UOp, slots: Sequence[tuple[Shape, DType | None]], n_explicit: int | None = None) -> Jaxpr:
        """The Jaxpr of a TUPLE `body` over PARAMs 0..len(slots)-1 of the given types; slots from `n_explicit` on
        are constvars (captured values)."""
        nodes = body.toposort(_scope_children)
        params = {u.arg[0]: u for u in nodes if u.op is Ops.PARAM}
        types = [(params[k].arg[1], params[k].dtype) if k in params else t for k, t in enumerate(slots)]
        types += [(params[k].arg[1], params[k].dtype) for k in sorted(params) if k >= len(types)]
        env: dict[UOp, Atom | tuple[Var, ...]] = {}
        split = len(types) if n_explicit is None else n_explicit
        captured = [self.var(s, d) for s, d in types[split:]]   # named first, as JAX names a closed jaxpr's consts
        slot_vars = [self.var(s, d) for s, d in types[:split]] + captured
        for k, p in params.items():
            env[p] = slot_vars[k]
        # constants that something other than an elementwise op reads (a reduce, a call, a result) get a line
        needs_line = {s for u in nodes if not _is_const_view(u) and u.op not in GroupOp.Elementwise
                      for s in _scope_children(u) if _is_const_view(s) and s.shape != ()}
        eqns: list[Eqn] = []
        for u in nodes:
            if u is body or u.op is Ops.PARAM:
                continue
            if u.op is Ops.GETTUPLE:
                env[u] = env[u.src[0]][u.arg]
                continue
            if _is_const_view(u):
                if u in needs_line:
                    out = self.var(u.shape, u.dtype)
                    eqns.append(Eqn("broadcast", {"shape": u.shape}, (Literal(_const_value(u), u.dtype),), (out,), u))
                    env[u] = out
                continue
            invars = tuple(self.atom(s, env) for s in _scope_children(u))
            if u.op in _CALLS:
                outs = tuple(self.var(s, d) for s, d in _result_types(u))
                env[u] = outs
                eqns.append(Eqn(u.op.name.lower(), _params(u), invars, outs, u, self.bodies(u)))
            else:
                out = self.var(u.shape, u.dtype)
                env[u] = out
                eqns.append(Eqn(_primitive(u), _params(u), invars, (out,), u))
        outvars = tuple(self.atom(s, env) for s in body.src)
        return Jaxpr(tuple(slot_vars[split:]), tuple(slot_vars[:split]), outvars, tuple(eqns))

    def atom(self, u: UOp, env: dict[UOp, Any]) -> Atom:
        if u in env:
            return env[u]
        assert _is_const_view(u), f"make_jaxpr: {u.op} was not named before it was read"
        return Literal(_const_value(u), u.dtype)

    def bodies(self, u: UOp) -> tuple[tuple[str, Jaxpr], ...]:
        """The bodies of a call or a loop, each with the types of its own PARAM slots."""
        operands = [(s.shape, s.dtype) for s in _scope_children(u)]
        if u.op in (Ops.FUNCTION, Ops.CALL):
            if u.src[0].op is not Ops.TUPLE:   # a custom kernel: its body is a kernel AST, not a traced function
                return ()
            return (("body", self.body(u.src[0], operands)),)
        if u.op is Ops.LOOP:
            spec = u.arg
            consts, carries, xs, _ = spec.operands(u)
            slots = [((), INDEX_DTYPE), *[(c.shape, c.dtype) for c in (*consts, *carries)]]
            out = [("body", self.body(u.src[0], slots + [(x.shape[1:], x.dtype) for x in xs]))]
            if spec.cond:
                out.append(("cond", self.body(u.src[1], slots)))
            return tuple(out)
        # SWITCH: every branch takes the operands (after the index)
        return tuple((f"branch{i}", self.body(b, operands[1:])) for i, b in enumerate(u.src[:u.arg.n_branches]))


def _result_types(u: UOp) -> list[tuple[Shape, DType | None]]:
    if u.op is Ops.LOOP:
        return loop_results(u)
    body = u.src[0]
    if body.op in (Ops.SINK, Ops.CALLBACK):   # a custom kernel or callback's results: (shape, dtype, device) in its arg
        return [(s, d) for s, d, _ in u.arg[2]]
    return [(body.src[i].shape, body.src[i].dtype) for i in range(n_results(u))]


def _primitive(u: UOp) -> str:
    if u.op is Ops.REDUCE_AXIS:
        return _REDUCE.get(u.arg[0], f"reduce_{u.arg[0].name.lower()}")
    return u.op.name.lower()


def _name_of(f: Any) -> str:
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)


def _params(u: UOp) -> dict[str, Any]:
    """The arguments of `u` worth reading, by name."""
    op, arg = u.op, u.arg
    if op in (Ops.RESHAPE, Ops.EXPAND):
        return {"shape": arg}
    if op in (Ops.PERMUTE, Ops.FLIP):
        return {"axes": arg}
    if op is Ops.PAD:
        return {"padding": arg}
    if op is Ops.SHRINK:
        return {"bounds": arg}
    if op is Ops.REDUCE_AXIS:
        return {"axes": arg[1]}
    if op is Ops.IOTA:
        return {"n": arg}
    if op is Ops.COPY:
        return {"device": arg}
    if op is Ops.MULTI:
        return {"axis": arg}
    if op is Ops.MSELECT:
        return {"index": arg[0], "axis": arg[1]}
    if op is Ops.ALLREDUCE:
        return {"op": arg.name.lower()}
    if op in (Ops.FUNCTION, Ops.CALL):
        out = {"name": arg[0]}
        if arg[1] is not None:
            out["grad_fxn"] = _name_of(getattr(arg[1], "grad_fxn", arg[1]))   # the user's, inside its Backward
        return out
    if op is Ops.LOOP:
        out = {"name": arg.name, "length": arg.length, "n_consts": arg.n_consts, "n_carry": arg.n_carry,
               "n_xs": arg.n_xs}
        out.update({k: True for k in ("reverse", "cond", "dynamic", "save") if getattr(arg, k)})
        return out
    if op is Ops.SWITCH:
        return {"name": arg.name, "branches": arg.n_branches}
    if op in GroupOp.Elementwise or op in (Ops.CONTIGUOUS, Ops.TUPLE) or arg is None:
        return {}
    return {"arg": arg}


# ---- printing ----
def _format(j: Jaxpr, indent: int) -> list[str]:
    pad = " " * indent
    consts = " ".join(v.typed for v in j.constvars)
    head = f"{{ lambda {consts}; {' '.join(v.typed for v in j.invars)}. let"
    lines = [head]
    for e in j.eqns:
        params = " ".join(f"{k}={v}" for k, v in e.params.items())
        rhs = e.primitive + (f"[{params}]" if params else "") + "".join(f" {a}" for a in e.invars)
        lines.append(f"{pad}    {' '.join(v.typed for v in e.outvars)} = {rhs}")
        for name, b in e.bodies:
            sub = _format(b, indent + 6)
            lines.append(f"{pad}      {name}={sub[0]}")
            lines += sub[1:]
    outs = ", ".join(str(a) for a in j.outvars)
    lines.append(f"{pad}  in ({outs}{',' if len(j.outvars) == 1 else ''}) }}")
    return lines


# ---- the public function ----
def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = ()) -> Callable[..., Jaxpr]:
    """A function that traces `fun` on its arguments and returns the traced graph as a `Jaxpr` (like
    `jax.make_jaxpr`), whose `str()` is a readable listing: inputs with their types, one equation per op, results.

    The trace is `tg.jit`'s: every Tensor leaf of the arguments (any pytree), and every numpy array, is an input;
    Python scalars and the positional arguments named in `static_argnums` are baked into the trace. Nothing is
    computed: tracing builds a graph and compiles and runs no kernel, so reading a traced value (`float(x)`,
    `if x > 0`) raises `tg.ConcretizationError`, as under `jit`. Transforms inside `fun` (`grad`, `vmap`, `jit`,
    `tg.lax` loops) show up as the graph they build: nested FUNCTIONs and LOOPs print their bodies indented.

    >>> def loss(w, batch):
    ...     return tnp.mean((batch["x"] @ w - batch["y"]) ** 2)
    >>> print(tg.make_jaxpr(tg.grad(loss))(w, {"x": x, "y": y}))    # the gradient's graph, one line per op

    Raises:
        TypeError: `fun` is not callable, or a static argument number is not an int.
    """
    if not callable(fun):
        raise TypeError(f"make_jaxpr: expected a callable, got {type(fun).__name__} {fun!r:.60}")
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    if not all(isinstance(i, int) for i in static):
        raise TypeError(f"make_jaxpr: static_argnums must be ints, got {static_argnums!r}")
    name = _name_of(fun)

    @functools.wraps(fun)
    def traced(*args: Any, **kwargs: Any) -> Jaxpr:
        n = len(args)
        bad = [i for i in static if not -n <= i < n]
        if bad:
            raise ValueError(f"make_jaxpr({name}): static_argnums {tuple(bad)} out of range for {n} positional "
                             f"argument(s)")
        fixed = {i % n for i in static}
        args = tuple(a if i in fixed else _as_inputs(a) for i, a in enumerate(args))
        kwargs = {k: _as_inputs(v) for k, v in kwargs.items()}
        inputs: dict[int, Tensor] = {}   # the Tensor leaves @function turns into PARAMs, deduplicated as it does
        for leaf in tree_flatten((args, kwargs))[0]:
            if isinstance(leaf, Tensor):
                inputs.setdefault(id(leaf), leaf)
        out = Function(fun, allow_implicit=True, name=name)(*args, **kwargs)
        fn = tree_flatten(out)[0][0].uop.src[0]
        n_explicit = sum(len(device_parts(t.uop)) for t in inputs.values())   # the rest were captured
        j = _Builder().body(fn.src[0], [(a.shape, a.dtype) for a in fn.src[1:]], n_explicit)
        consts = tuple(Tensor(a) for a in fn.src[1 + n_explicit:])
        return Jaxpr(j.constvars, j.invars, j.outvars, j.eqns, fn, consts)
    return traced


def _as_inputs(tree: Any) -> Any:
    """Numpy arrays in `tree` as Tensors (they are inputs of the trace, as under jit)."""
    leaves, treedef = tree_flatten(tree)
    return tree_unflatten(treedef, [Tensor(x) if isinstance(x, np.ndarray) else x for x in leaves])


__all__ = ["make_jaxpr", "Jaxpr", "Eqn", "Var", "Literal"]
