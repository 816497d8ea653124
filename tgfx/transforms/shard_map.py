"""`shard_map(f, mesh, in_specs, out_specs)`: `f` run on each device's block of its arguments, as `jax.shard_map`,
with `lax.psum(x, "data")`, `pmean`, `pmax`, `all_gather`, `axis_index` over the mesh's axis names inside.

It is a vmap per mesh axis over arrays laid out on the mesh's devices, so nothing here moves data or runs a
collective itself: each argument is placed as `NamedSharding(mesh, in_spec)` says (`tgfx/sharding.py`: a device tuple
and the axis split across it), the axis a mesh axis splits is reshaped into (mesh axis size, block) and vmapped with
the mesh axis's name, so `f` sees one block and its collectives are vmap's (`tgfx/transforms/collectives.py`); the
batch axis being the sharded one, the ops on it run per device and a `psum` over it is the all-reduce ring the
lowering builds for any sum across a device tuple (`tgfx/lowering/multi.py`). The results are stitched back along the
axes `out_specs` names and placed as `NamedSharding(mesh, out_spec)`; a mesh axis an out_spec leaves out is one
whose blocks must be equal (psum'd, say): vmap's out_axes None for it, which raises where a result differs over the
axis, as JAX's replication check does.

>>> mesh = tg.make_mesh((2,), ("data",))                             # with TGFX_CPU_DEVICES=2
>>> f = tg.shard_map(lambda b: tg.lax.psum(b.sum(0), "data"), mesh=mesh, in_specs=P("data"), out_specs=P())
>>> f(np.ones((8, 3), np.float32))                                  # each device sums its 4 rows, then all-reduce
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from tgfx.sharding import Mesh, NamedSharding, PartitionSpec, get_mesh
from tgfx.tensor import Tensor, to_tensor
from tgfx.transforms.collectives import varying_manual_axes
from tgfx.transforms.shard import put
from tgfx.transforms.vmap import MappedOutputError, vmap
from tgfx.tree import keystr, tree_broadcast, tree_flatten, tree_flatten_with_path, tree_map, tree_unflatten

_is_spec = lambda s: s is None or isinstance(s, PartitionSpec)  # noqa: E731


def _specs(specs: Any, tree: Any, what: str) -> list[PartitionSpec]:
    """One PartitionSpec per leaf of `tree` (`specs` a prefix of its structure; None: replicated)."""
    try:
        per_leaf = tree_flatten(tree_broadcast(specs, tree, is_leaf=_is_spec), is_leaf=_is_spec)[0]
    except ValueError as e:
        raise ValueError(f"shard_map: {what} is not a prefix of the structure it describes: {e}") from None
    out = []
    for s in per_leaf:
        if not isinstance(s, (PartitionSpec, type(None))):
            raise TypeError(f"shard_map: {what} must hold PartitionSpecs (P(...)), got {type(s).__name__} {s!r}")
        out.append(PartitionSpec() if s is None else s)
    return out


def _split(x: Tensor, spec: PartitionSpec, mesh: Mesh) -> tuple[Tensor, set[str]]:
    """`x` with each axis a spec entry splits reshaped into (its mesh axes' sizes..., block) and those mesh axes
    moved in front in the mesh's order (the vmaps peel them off outermost first); the mesh axes it is split over."""
    shape: list[int] = []
    where: dict[str, int] = {}   # mesh axis -> its dimension after the reshape
    rest: list[int] = []
    for i, n in enumerate(x.shape):
        names = spec.names(i)
        ways = 1
        for a in names:
            where[a] = len(shape)
            shape.append(mesh.shape[a])
            ways *= mesh.shape[a]
        rest.append(len(shape))
        shape.append(n // ways)
    front = [where[a] for a in mesh.axis_names if a in where]
    return x.reshape(tuple(shape)).transpose(tuple(front + rest)), set(where)


def _named(spec: PartitionSpec | None, a: str) -> bool:
    return spec is not None and any(a in spec.names(i) for i in range(len(spec)))


def _stitch(y: Tensor, spec: PartitionSpec, mesh: Mesh, present: list[str], what: str) -> Tensor:
    """`y` of shape (the sizes of the mesh axes `present`, in the mesh's order..., block) back to one array: the
    blocks of a mesh axis concatenated along the array axis `spec` names it at (several names: the first outermost),
    block 0 of a mesh axis present that `spec` does not name (check_vma=False: the caller vouches they are equal)."""
    for k in reversed(range(len(present))):
        if not _named(spec, present[k]):
            y = y[(slice(None),) * k + (0,)]
    kept = [a for a in present if _named(spec, a)]
    rank = y.ndim - len(kept)
    if len(spec) > rank:
        raise ValueError(f"shard_map: {what}: out_specs entry {spec!r} is longer than the result's rank {rank} "
                         f"(its block shape is {y.shape[len(kept):]})")
    order, shape = [], []
    for i in range(rank):
        order += [kept.index(a) for a in spec.names(i)] + [len(kept) + i]
        shape.append(y.shape[len(kept) + i] * mesh_size(mesh, spec.names(i)))
    return y.transpose(tuple(order)).reshape(tuple(shape))


def mesh_size(mesh: Mesh, names: tuple[str, ...]) -> int:
    out = 1
    for a in names:
        out *= mesh.shape[a]
    return out


def shard_map(f: Callable | None = None, mesh: Mesh | None = None, in_specs: Any = None, out_specs: Any = None, *,
              axis_names: Any = frozenset(), check_vma: bool = True, check_rep: bool = True) -> Any:
    """`f` mapped over the blocks of its arguments on `mesh`'s devices, as `jax.shard_map` (and the older
    `jax.experimental.shard_map.shard_map(f, mesh, in_specs, out_specs)`): `in_specs` / `out_specs` are
    PartitionSpecs, one for all or a pytree prefix of the arguments' tuple / the results. Inside `f` each array is its
    device's block, and `tg.lax.psum(x, "data")`, `pmean`, `pmax`, `all_gather`, `axis_index` combine the blocks over
    a mesh axis. `mesh` defaults to the one of `with mesh:`. A mesh axis an out_spec does not name must hold equal
    blocks: a result that depends on its blocks without a collective over it is a ValueError, as JAX's check (with
    `check_vma=False`, block 0 is returned). A gradient taken inside `f` is JAX's: with check_vma, a psum's
    cotangent the same on every device goes back as it is (without, it is psum'd), and the gradient of an input the
    same on every device of a mesh axis is summed over that axis.

    >>> @functools.partial(tg.shard_map, mesh=mesh, in_specs=(P("data"), P()), out_specs=P())
    ... def loss(x, w):                                   # x: this device's rows, w: whole
    ...     return tg.lax.pmean(((x @ w) ** 2).mean(), "data")

    Raises:
        ValueError: no mesh; specs that are not a prefix of the arguments or results; an axis that does not divide
            over its mesh axes (see `NamedSharding`); a result that differs over a mesh axis its out_spec leaves out.
        NotImplementedError: a spec whose layout tgfx's device tuples cannot hold (see `tgfx/sharding.py`).
    """
    if f is None:
        return functools.partial(shard_map, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                 axis_names=axis_names, check_vma=check_vma, check_rep=check_rep)
    if out_specs is None:
        raise TypeError("shard_map: out_specs is required (P() for a result every device holds whole)")
    name = getattr(f, "__name__", type(f).__name__)
    check = check_vma and check_rep

    @functools.wraps(f)
    def mapped(*args: Any) -> Any:
        m = mesh if mesh is not None else get_mesh()
        if m is None:
            raise ValueError(f"shard_map({name}): no mesh: pass mesh=, or call inside `with mesh:`")
        flat, treedef = tree_flatten_with_path(args)
        blocks, used = [], []
        for (path, leaf), spec in zip(flat, _specs(in_specs, args, "in_specs"), strict=True):
            t = put(to_tensor(leaf), NamedSharding(m, spec), f"shard_map({name}): args{keystr(path)}")
            b, axes = _split(t, spec, m)
            blocks.append(b)
            used.append(axes)
        def per_block(*bs: Any) -> Any:
            return tree_map(to_tensor, f(*tree_unflatten(treedef, bs)))
        fn = per_block
        for a in reversed(m.axis_names):
            # a mesh axis the out_spec does not name: vmap's out_axes None, so a result that differs over it (not
            # psum'd, say) raises, as JAX's replication check does
            out_axes = 0 if not check else tree_map(lambda s, a=a: 0 if _named(s, a) else None, out_specs,
                                                    is_leaf=_is_spec)
            fn = vmap(fn, in_axes=tuple(0 if a in u else None for u in used), out_axes=out_axes, axis_name=a,
                      axis_size=m.shape[a])
        try:
            with varying_manual_axes(frozenset(m.axis_names) if check else frozenset()):
                result = fn(*blocks)
        except MappedOutputError as e:
            raise ValueError(f"shard_map({name}): out_specs {out_specs!r} leave out a mesh axis over which a result "
                             f"differs between devices; name the axis in its out_spec, or combine the blocks over it "
                             f"first (tg.lax.psum, pmean, all_gather). ({e})") from None
        specs = _specs(out_specs, result, "out_specs")
        done = []
        pairs, out_tree = tree_flatten_with_path(result)
        for (path, y), spec in zip(pairs, specs, strict=True):
            what = f"result{keystr(path)}"
            present = list(m.axis_names) if not check else [a for a in m.axis_names if _named(spec, a)]
            done.append(put(_stitch(y, spec, m, present, what), NamedSharding(m, spec), f"shard_map({name}): {what}"))
        return tree_unflatten(out_tree, done)
    return mapped


__all__ = ["shard_map"]
