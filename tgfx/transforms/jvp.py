"""Forward mode and Jacobians: `jvp`, `jacfwd`, `jacrev`, `hessian`, all from the reverse-mode rules in grad.py.

Forward mode is reverse mode transposed (the "linear transpose" trick): the pullback g(u) = uᵀJ is linear in the
cotangent u, so for a tangent t, ⟨g(u), t⟩ = ⟨u, J t⟩ and J t = d/du ⟨g(u), t⟩, a second reverse pass, with respect
to the cotangent stand-in. It is exact (no finite differences) and needs no second table of rules. The result holds
no cotangent: the derivative of a linear function does not depend on where it is taken. Loops are the exception:
their reverse rule defers to their own forward mode there (control_grad.py), so a loop with no bound on its steps has
a `jvp` too, and no loop saves its carries for it.

Jacobians batch over the basis with vmap's batching pass: `jacrev` builds the pullback once and evaluates it at the
identity matrix (every basis cotangent at once, a batch axis in front); `jacfwd` does the same with the pushforward of
each input leaf. The graph, and the number of kernels, do not grow with the number of rows or columns.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp, prod
from tgfx.tensor import Tensor, weak, weak_like
from tgfx.transforms.collectives import bind_batched, sum_invariant_gradients
from tgfx.transforms.control_grad import forward_mode, primal_twins, read_twins
from tgfx.transforms.grad import (
    Traced,
    Transformed,
    _argnums_tuple,
    check_like,
    compute_gradient,
    leave_trace,
    leave_with_aux,
    linear_input,
    pullback_graph,
    trace,
    zeros_like,
)
from tgfx.tree import keystr, tree_flatten, tree_flatten_with_path, tree_unflatten


def _sum_all(u: UOp) -> UOp:
    if not u.shape:
        return u
    r = UOp(Ops.REDUCE_AXIS, u.dtype, (u,), (Ops.ADD, tuple(range(len(u.shape)))))
    return UOp(Ops.RESHAPE, u.dtype, (r,), ())


def pushforward(tr: Traced, which: Sequence[int]) -> tuple[dict[int, UOp], list[UOp | None]]:
    """Tangent stand-ins for the inputs `which` (those with a gradient), and each output's tangent, linear in them."""
    cots, grads = tr.pullback(forward=True)
    tangents = {i: linear_input(tr.params[i], "tangent") for i in which if grads[i] is not None}
    return tangents, _transpose(cots, [(grads[i], t) for i, t in tangents.items()])


def pushforward_graph(outs: Sequence[UOp], tangents: dict[UOp, UOp]) -> list[UOp | None]:
    """The tangent of each of `outs` (None: zero, or not a float) given the tangents of some leaves they read,
    `{leaf: tangent}`, by transposing their pullback as `pushforward` does."""
    leaves = list(tangents)
    cots, grads = pullback_graph(outs, leaves, forward=True)
    d = _transpose(cots, [(g, tangents[p]) for p, g in zip(leaves, grads, strict=True) if g is not None])
    leftover = {c: zeros_like(c) for c in cots if c is not None}
    return [None if t is None else t.substitute(leftover) for t in d]


def _transpose(cots: list[UOp | None], pairs: list[tuple[UOp, UOp]]) -> list[UOp | None]:
    """J t from the pullback: `pairs` holds each input's gradient (linear in the cotangent stand-ins `cots`) with that
    input's tangent; the result is d/du <g(u), t> for each output's stand-in u."""
    terms = [_sum_all(g * t) for g, t in pairs]
    if not terms:
        return [None] * len(cots)
    dt = max((t.dtype for t in terms), key=lambda d: d.itemsize)  # mixed float inputs: pair in the widest
    inner = functools.reduce(lambda a, b: a + b, [t.cast(dt) for t in terms])
    # the pairing of a complex cotangent with a tangent is the real part of their product (JAX's convention)
    inner, dt = (inner.cast(dt.real), dt.real) if dt.is_complex else (inner, dt)
    # (reverse mode proper: what this pass builds is evaluated; a loop of the pullback, e.g. a custom backward's
    # triangular solves, has its own reverse rule here, and a placeholder's rule is its loop's JVP)
    with forward_mode(False):
        d = compute_gradient(inner, UOp.const(dt, 1.0), [c for c in cots if c is not None])
    return [None if c is None else d.get(c) for c in cots]


def _linear_leftovers(tr: Traced) -> dict[UOp, UOp]:
    # a tangent output never holds its cotangent stand-in; binding them to zeros is a guard for rules that would
    cots, _ = tr.pullback(forward=True)
    return {c: zeros_like(c) for c in cots if c is not None}


def jvp(fun: Callable, primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False) -> tuple:
    """`(f(*primals), J @ tangents)`, forward mode, as `jax.jvp`: exact, computed by transposing reverse mode.

    `primals` and `tangents` are tuples (or lists) of the same structure, shapes and float dtypes. With has_aux,
    `(out, tangent_out, aux)`. Integer primals are passed through; their tangents are ignored.

    >>> y, dy = tg.jvp(tnp.sin, (tg.asarray([0.0, 1.0]),), (tnp.ones(2),))   # sin(x), cos(x)
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(f"jvp: primal and tangent arguments must be tuples or lists; found "
                        f"{type(primals).__name__} and {type(tangents).__name__}")
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents; pass one tangent per primal")
    tr = trace("jvp", fun, tuple(primals), {}, tuple(range(len(primals))), has_aux, allow_int=True)
    flat_t: list[Any] = []
    for i, t in enumerate(tangents):
        leaves, tree = tree_flatten(t)
        if tree != tr.in_trees[i]:
            raise ValueError(f"jvp: primal {i} has structure {tr.in_trees[i]!r} but its tangent has {tree!r}")
        flat_t.extend(leaves)
    bind = {}
    with primal_twins() as twins:   # a loop's primal results are read from its JVP loop: the loop runs once
        tans, outs_t = pushforward(tr, range(len(tr.params)))
    for i, stand_in in tans.items():
        bind[stand_in] = check_like("jvp", f"tangent leaf {i}", flat_t[i], tr.inputs[i])
    outs_t = [zeros_like(o) if d is None else d for o, d in zip(tr.outs, outs_t, strict=True)]
    flat, aux = leave_with_aux(tr, read_twins([*tr.outs, *outs_t], twins), {**_linear_leftovers(tr), **bind})
    n = len(tr.outs)
    # the values as the function computed them, and their tangents of the same types: JAX gives a tangent its
    # primal's weak type (`jvp(lambda x: x * x, (2.0,), (f32(1.0),))` is a weak float32 pair), and a tangent of a
    # strongly typed output comes from a strong operand or a conversion (which converts the tangent too)
    flat = weak_like(flat[:n], tr.weak_outs) + weak_like(flat[n:], tr.weak_outs)
    out, tangent_out = tree_unflatten(tr.out_tree, flat[:n]), tree_unflatten(tr.out_tree, flat[n:])
    return (out, tangent_out, aux) if has_aux else (out, tangent_out)


def _require_float_outputs(tr: Traced, ints: bool = False) -> None:
    """Outputs jacrev can pull back (real floats, as JAX's); jacfwd (`ints`) takes integer outputs too, as JAX does,
    their blocks zeros of their type (JAX's float0 tangents, converted)."""
    for path, o in zip(tree_flatten_with_path(tree_unflatten(tr.out_tree, tr.outs))[0], tr.outs, strict=True):
        if not (o.dtype.is_float or ints and o.dtype.is_int):
            raise TypeError(f"{tr.who} requires real-valued (float{' or integer' if ints else ''}) outputs, but the "
                            f"output{keystr(path[0])} has dtype {o.dtype.name}"
                            + ("; for integer outputs use tg.vjp directly" if not ints and o.dtype.is_int else ""))


def _jacobian_tree(tr: Traced, blocks: list[list[UOp]], argnums: Any, bind: dict[UOp, UOp], by_input: bool) -> Any:
    """blocks[j][i]: d out_j / d in_i. The result has the output's structure, each leaf the inputs' structure.

    Each block has the type of input i (`by_input`: jacrev) or of output j (jacfwd), weak type included, as JAX
    converts them (`_possible_downcast`): `jacrev(lambda x: x * h16)(2.0)` is a weak float32, its `jacfwd` a
    float16, and a block no path reaches is zeros of that type too."""
    n_in = len(tr.params)
    flat = []
    for k, u in enumerate(leave_trace(tr, [b for row in blocks for b in row], bind)):
        j, i = divmod(k, n_in)
        like, w = (tr.params[i], tr.weak_inputs[i]) if by_input else (tr.outs[j], tr.weak_outs[j])
        u = u.cast(like.dtype) if u.dtype.is_complex == like.dtype.is_complex else u
        if by_input:   # (inside a shard_map: a replicated input's rows summed over its devices, as grad's and vjp's)
            u = sum_invariant_gradients([tr.inputs[i]], [Tensor(u)])[0].uop
        flat.append(weak(Tensor(u)) if w else Tensor(u))
    rows = []
    for j in range(len(tr.outs)):
        per_arg = tr.per_arg(flat[j * n_in:(j + 1) * n_in])
        rows.append(per_arg[0] if isinstance(argnums, (int, np.integer)) else tuple(per_arg))
    return tree_unflatten(tr.out_tree, rows)


def _basis_batched(roots: list[UOp | None], seed: UOp, like: UOp) -> list[UOp | None]:
    """`roots` (linear in `seed`) evaluated at every basis vector of `seed`'s shape at once: a batch axis in front,
    one entry per basis vector, by the vmap batching pass."""
    from tgfx.transforms.vmap import batch_graph
    n = prod(like.shape)
    present = [r for r in roots if r is not None]
    dev = like.device if isinstance(like.device, str) else None
    if n == 0:   # no basis vectors: empty batches, which must not read `seed` (a stand-in no one substitutes)
        return [None if r is None else Tensor.full((0, *r.shape), 0, r.dtype, dev).uop for r in roots]
    if not present:
        return [None for _ in roots]
    eye_t = Tensor(np.eye(n).reshape((n, *like.shape)), dtype=like.dtype, device=dev)
    if type(like.device) is tuple:   # (a shard_map's value, on its device tuple: the basis replicated over it)
        from tgfx.transforms.shard import shard
        eye_t = shard(eye_t, like.device)
    eye = eye_t.uop
    # a basis vector is the same for every example of a vmap or shard_map the Jacobian is taken in: a collective's
    # batch of `seed` over such an axis is the seed broadcast (`collectives.bind_batched`)
    if batches := bind_batched({seed.tag: seed}):
        present = list(UOp(Ops.SINK, None, tuple(present)).substitute(batches).src)
    batched, flags = batch_graph(present, {seed: eye}, n)
    out, it = [], iter(zip(batched, flags, strict=True))
    for r in roots:
        if r is None:
            out.append(None)
            continue
        b, has_batch = next(it)
        out.append(b if has_batch else UOp(Ops.EXPAND, b.dtype, (UOp(Ops.RESHAPE, b.dtype, (b,), (1, *b.shape)),),
                                           (n, *b.shape)))
    return out


def _block_batched(rows: UOp | None, out: UOp, inp: UOp, axis: int) -> UOp:
    """A Jacobian block from a batch of rows (axis 0: out.shape + in.shape) or columns (axis -1: batch moved last)."""
    if rows is None:
        return Tensor.full(out.shape + inp.shape, 0, out.dtype).uop
    t = Tensor(rows)
    if axis == -1:
        t = t.reshape(t.shape[0], prod(t.shape[1:])).T   # (not -1: the output may have no elements)
    return t.reshape(out.shape + inp.shape).uop


def _jacrev_call(fun: Callable, args: tuple, kwargs: dict, *, argnums: Any, has_aux: bool) -> Any:
    tr = trace("jacrev", fun, args, kwargs, argnums, has_aux)
    _require_float_outputs(tr)
    blocks = []
    for o in tr.outs:
        cot = linear_input(o, "cotangent")
        with forward_mode(False):
            g = compute_gradient(o, cot, tr.params)
        # every pullback at once: the cotangent becomes the batch of all basis vectors (one graph, not one per row)
        rows = _basis_batched([g[p] if p in g else None for p in tr.params], cot, o)
        blocks.append([_block_batched(r, o, p, 0) for r, p in zip(rows, tr.params, strict=True)])
    jac = _jacobian_tree(tr, blocks, argnums, {}, by_input=True)
    if not has_aux:
        return jac
    _, aux = leave_with_aux(tr, [])
    return jac, aux


def _jacfwd_call(fun: Callable, args: tuple, kwargs: dict, *, argnums: Any, has_aux: bool) -> Any:
    tr = trace("jacfwd", fun, args, kwargs, argnums, has_aux)
    _require_float_outputs(tr, ints=True)
    cols: list[list[UOp | None]] = [[None for _ in tr.params] for _ in tr.outs]  # [out][in] -> batch of columns
    for i, p in enumerate(tr.params):
        tans, outs_t = pushforward(tr, [i])
        if i in tans:  # every pushforward at once: the tangent becomes the batch of all basis vectors
            for j, d in enumerate(_basis_batched(list(outs_t), tans[i], p)):
                cols[j][i] = d
    blocks = [[_block_batched(cols[j][i], o, p, -1) for i, p in enumerate(tr.params)] for j, o in enumerate(tr.outs)]
    jac = _jacobian_tree(tr, blocks, argnums, _linear_leftovers(tr), by_input=False)
    if not has_aux:
        return jac
    _, aux = leave_with_aux(tr, [])
    return jac, aux


def jacrev(fun: Callable | None = None, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Any:
    """The Jacobian by reverse mode (one pullback per output element), as `jax.jacrev`.

    For output leaf of shape S and input leaf of shape T the block has shape S + T; the result has the output's
    structure with, at each leaf, the differentiated arguments' structure (a tuple when argnums is a tuple).

    >>> tg.jacrev(lambda x: x * x)(tg.asarray([1.0, 2.0]))   # [[2, 0], [0, 4]]
    """
    if fun is None:
        return functools.partial(jacrev, argnums=argnums, has_aux=has_aux)
    _argnums_tuple("jacrev", argnums)
    return Transformed(fun, functools.partial(_jacrev_call, argnums=argnums, has_aux=has_aux))


def jacfwd(fun: Callable | None = None, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Any:
    """The Jacobian by forward mode (one pushforward per input element), as `jax.jacfwd`; same layout as jacrev.

    >>> tg.jacfwd(lambda x: tnp.sin(x).sum())(tg.asarray([0.0, 1.0]))   # cos(x)
    """
    if fun is None:
        return functools.partial(jacfwd, argnums=argnums, has_aux=has_aux)
    _argnums_tuple("jacfwd", argnums)
    return Transformed(fun, functools.partial(_jacfwd_call, argnums=argnums, has_aux=has_aux))


def hessian(fun: Callable | None = None, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Any:
    """The Hessian, `jacfwd(jacrev(f))` as in JAX: for a scalar f of x with shape T, shape T + T.

    >>> tg.hessian(lambda x: (x ** 3).sum())(tg.asarray([1.0, 2.0]))   # diag(6x)
    """
    if fun is None:
        return functools.partial(hessian, argnums=argnums, has_aux=has_aux)
    return jacfwd(jacrev(fun, argnums, has_aux), argnums, has_aux)


jacobian = jacrev  # JAX's other name for jacrev


__all__ = ["jvp", "jacfwd", "jacrev", "jacobian", "hessian", "pushforward"]
