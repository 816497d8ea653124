"""packs: a register tile's accumulators grouped into vectors, for the renderer.

UPCAST and UNROLL (tgfx/lowering/kernel_opts.py) replicate a reduce once per lane where the lanes are no vector range
(an UPCAST whose accesses are all side by side is one, rendered as vectors directly: `kernel_opts.vector_lanes`): a
direct convolution's tile, whose input is a padded read, or UNROLL's partial sums. A 16 x 4 tile of lane copies is
64 scalar accumulators, each updated by `acc += a[i + r] * b[j + l]` in the reduce loop. Left scalar, LLVM's SLP
vectoriser has to rebuild vectors from those lanes; it takes most of the optimiser's time on a big tile, and where
the tile's epilogue is not a plain store (a bias and a tanh after a matmul) it builds a mix of partial vectors,
shuffles and spills instead (a tanh(x @ w + b) kernel ran at a sixth of the plain matmul's rate). So the renderer
gives the accumulators of a tile `<lanes x float>` registers of their own and renders their update as one vector
expression.

A pack is `lanes` accumulators of one reduce loop, with the same reduce op and dtype, whose values are the same
expression but for the constant parts of their loads' offsets, and whose lane l reads at offset `d + l * s` of each load
(s is 0 for a load every lane shares, a broadcast, 1 for one they read side by side, a vector load, and up to MAX_STEP
for one they read every s-th element of, a strided convolution's input): what `find_packs` looks for. A padded read's
lanes (a convolution's: `where(valid, x[where(valid, e, 0) + l * s], 0)` at the edges, `x[e + l * s]` between) count as
the same load at offset e + l * s (`masked_read`, `unclamped_offset`): the renderer reads them as one masked vector load
(s vectors' worth, every s-th lane kept, for s > 1); so do the bare clamped loads of a padded read whose value is
computed on before the mask applies (a convolution of `relu(x + b)`, fused), and conditions on the loop indices alone
may differ from lane to lane (the renderer builds them as one mask vector). A tile narrower than a vector packs by half
vectors, down to 4 lanes. Lanes of a pack are the vector's elements in order; after the loop each is extracted for the
(scalar) epilogue. Accumulators that form no full pack stay scalar.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tgfx.dtypes import DType
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp

T = TypeVar("T")

# the longest step between a pack's lanes in one load: a read every s-th element is s vector loads (masked) whose
# every s-th lane is kept; longer steps cost more loads than the gather of the lanes they replace
MAX_STEP = 4
# loads in one accumulator's value that a signature keeps apart: a bigger expression is left to SLP (its lanes are
# unlikely to line up, and its signature would cost more than it saves)
MAX_LOADS = 32
_LEAVES = (Ops.CONST, Ops.DEFINE_GLOBAL, Ops.RANGE, Ops.SPECIAL, Ops.DEFINE_ACC, Ops.REDUCE)


@dataclass(eq=False)
class Pack:
    """`accs[l]` is lane l; `values[l]` its update's value; `op` the reduce's combine op."""
    accs: tuple[UOp, ...]
    values: tuple[UOp, ...]
    stores: tuple[UOp, ...]
    op: Ops
    dtype: DType
    id: int


def square_tiles(by_offset: dict[int, T], width: int) -> list[tuple[T, ...]]:
    """Accesses of one buffer that differ only in their constant offset (`by_offset`, by it) taken as tiles of `width`
    consecutive offsets, each access in one tile at most: a square a vector range reads or writes as `width` row
    vectors transposed in registers (`render_wide.find_wide_tiles`; `kernel_opts.vector_lanes` asks which stores the
    renderer will tile)."""
    tiles, taken = [], set()
    for c in sorted(by_offset):
        tile = tuple(by_offset.get(c + j) for j in range(width))
        if all(t is not None and t not in taken for t in tile):
            taken.update(tile)
            tiles.append(tile)
    return tiles


def _content(u: UOp) -> str:
    return u.key


def split_offset(off: UOp) -> tuple[tuple[UOp, ...], int]:
    """An index as (its non-constant terms, the sum of its constant ones): two offsets with the same terms are
    `delta` elements apart. The terms are in the order of their content `key`, the same in every process: the
    renderer adds a strided read's terms in this order (by `id`, a kernel's IR changed with where its nodes lay in
    memory)."""
    terms, const, stack = [], 0, [off]
    while stack:
        t = stack.pop()
        if t.op is Ops.ADD:
            stack.extend(t.src)
        elif t.op is Ops.CONST:
            const += t.arg
        else:
            terms.append(t)
    return tuple(sorted(terms, key=_content)), const


def _is_clamp(u: UOp) -> bool:
    """`where(mask, t, 0)`: a clamped index term, or a padded read's value."""
    return u.op is Ops.WHERE and u.src[2].op is Ops.CONST and u.src[2].arg == 0


def unclamped_offset(off: UOp) -> tuple[tuple[UOp, ...], int]:
    """`split_offset` of an index whose clamped terms `where(valid, t, 0)` (a padded read's, kernel_opts.py's
    `hoist_lane`) are taken as `t`: the offset a lane reads where its mask holds."""
    terms, const = split_offset(off)
    if not any(t.op is Ops.WHERE for t in terms):
        return terms, const
    out: list[UOp] = []
    for t in terms:
        if _is_clamp(t):
            inner, c = split_offset(t.src[1])
            out.extend(inner)
            const += c
        else:
            out.append(t)
    return tuple(sorted(out, key=_content)), const


def _clamp_mask(off: UOp) -> tuple[bool, UOp | None]:
    """(whether every clamped term `where(mask, t, 0)` of index `off` has one mask, that mask or None if none is)."""
    clamps = {t.src[0] if _is_clamp(t) else None for t in split_offset(off)[0] if t.op is Ops.WHERE}
    return (len(clamps) <= 1 and None not in clamps), next(iter(clamps), None)


def masked_read(u: UOp) -> tuple[UOp, UOp | None] | None:
    """(load, mask) if `u` is a direct load or `where(mask, load, 0)` of one, whose clamped offset terms
    `where(mask, t, 0)` share the mask (None: the load is not clamped): a lane of a padded read, which reads where the
    mask holds. A clamped load's value where its mask fails is never used (rangeify masks a padded read's value by
    the PAD's validity, PADTO gates the store or masks the reduce it feeds), so such a lane may read 0 there."""
    if direct_load(u):
        one, mask = _clamp_mask(u.src[0].src[1])
        return (u, mask) if one else None
    if not _is_clamp(u) or not direct_load(u.src[1]):
        return None
    mask, load = u.src[0], u.src[1]
    one, clamp = _clamp_mask(load.src[0].src[1])
    return (load, mask) if one and clamp in (None, mask) else None


def direct_load(u: UOp) -> bool:
    """A load of a global buffer element (not a register, not a masked read)."""
    return u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and u.src[0].src[0].op is Ops.DEFINE_GLOBAL and \
        not u.dtype.is_bool


class _Signatures:
    """Each value's shape with its loads' constant offsets taken out (`key`), and those offsets in order
    (`deltas`): two values with the same key differ only in where they read. With `loose_masks`, conditions on the
    loop indices alone (a padded read's validity, which differs at a tile's edge lanes) all have one key: the
    renderer builds such a vector of conditions lane by lane."""

    def __init__(self, loose_masks: bool = False) -> None:
        self.memo: dict[UOp, tuple[object, tuple[int, ...]]] = {}
        self.loose_masks = loose_masks
        self.index_only: dict[UOp, bool] = {}
        # each key is interned as a number: a key made of its sources' keys would be the value's graph as a tree,
        # exponentially large where the graph shares (a random normal's hash rounds: a jitted gradient through one
        # hashed keys without end)
        self.ids: dict[tuple, int] = {}

    def _index_only(self, u: UOp) -> bool:
        """Whether `u` reads no memory (its leaves are loop indices, constants and core ids)."""
        if (hit := self.index_only.get(u)) is None:
            hit = self.index_only[u] = u.op is not Ops.LOAD and all(self._index_only(s) for s in u.src)
        return hit

    def __call__(self, u: UOp) -> tuple[object, tuple[int, ...]]:
        if (hit := self.memo.get(u)) is not None:
            return hit
        if (read := masked_read(u)) is not None and (read[1] is None or self._index_only(read[1])):
            # a padded read's lanes, masked or not, are one vector's (a mask that reads memory, `where(x > 0, g, 0)`
            # in a relu's gradient, tells the lanes apart by what it reads)
            load = read[0]
            base, delta = unclamped_offset(load.src[0].src[1])
            out: tuple[object, tuple[int, ...]] = (("load", load.src[0].src[0], base, load.dtype), (delta,))
        elif self.loose_masks and u.dtype is not None and u.dtype.is_bool and u.op is not Ops.CONST and \
                self._index_only(u):
            out = (("index condition",), ())
        elif u.op in _LEAVES or not u.src:
            out = (u, ())
        else:
            subs = [self(s) for s in u.src]
            deltas = tuple(d for _, ds in subs for d in ds)
            key = self.ids.setdefault((u.op, u.dtype, u.arg, tuple(k for k, _ in subs)), len(self.ids))
            out = (key, deltas) if len(deltas) <= MAX_LOADS else (("apart", u), ())
        self.memo[u] = out
        return out


def _update(st: UOp) -> tuple[Ops, UOp] | None:
    """The reduce op and the value of an accumulator's update `STORE(acc, op(LOAD(acc), value))`, else None."""
    acc, upd = st.src[0], st.src[1]
    if acc.op is not Ops.DEFINE_ACC or acc.tag == "carry" or len(upd.src) != 2:
        return None
    cur = upd.src[0]
    if cur.op is not Ops.LOAD or cur.src[0] is not acc:
        return None
    return upd.op, upd.src[1]


def find_packs(lin: list[UOp], lanes: Callable[[DType], int], vector_dtype: Callable[[DType], bool]) -> list[Pack]:
    """The packs among the accumulator updates of `lin` (see the module docstring); `lanes(dtype)` is a vector's
    width, `vector_dtype(dtype)` whether that dtype is kept in vector registers at all."""
    sig, exact = _Signatures(loose_masks=True), _Signatures()
    classes: dict[tuple, list[tuple[tuple[int, ...], UOp, UOp, UOp]]] = {}
    body = -1
    for i, u in enumerate(lin):
        if u.op is Ops.RANGE:
            body = i
        elif u.op is Ops.STORE and (found := _update(u)) is not None and vector_dtype(u.src[0].dtype):
            op, value = found
            key, deltas = sig(value)
            if deltas:
                classes.setdefault((body, op, u.src[0].dtype, key), []).append((deltas, u.src[0], value, u))
    groups: list[tuple[Ops, DType, list]] = []
    for (_, op, dtype, _), members in classes.items():
        if len({m[0] for m in members}) == len(members):
            groups.append((op, dtype, members))
            continue
        # two accumulators that differ only in their conditions: their lanes are told apart by the exact conditions
        split: dict[object, list] = {}
        for m in members:
            split.setdefault(exact(m[2])[0], []).append(m)
        groups += [(op, dtype, ms) for ms in split.values()]
    packs: list[Pack] = []
    for op, dtype, members in groups:
        by_delta = {m[0]: m for m in members}
        if len(by_delta) < len(members):   # two accumulators of the same value: nothing to tell their lanes by
            continue
        # a vector's lanes, or half of them down to 4 where the tile is narrower (8 output columns of an image)
        width, best = lanes(dtype), []
        while width >= 4 and not best and len(members) >= width:
            best = _chains(by_delta, width)
            width //= 2
        for chain in best:
            packs.append(Pack(tuple(m[1] for m in chain), tuple(m[2] for m in chain), tuple(m[3] for m in chain),
                              op, dtype, len(packs)))
    return packs


def _chains(by_delta: dict[tuple[int, ...], tuple], width: int) -> list[list[tuple]]:
    """The most accumulators `width` at a time whose loads' offsets step by 0 to MAX_STEP from lane to lane (of two
    steps that pack as many, the one with the shorter longest step)."""
    order = sorted(by_delta)
    first = order[0]
    # the step from one lane to the next for each load, seen from the first accumulator
    steps = Counter(tuple(b - a for a, b in zip(first, d, strict=True)) for d in order[1:])
    steps = Counter({s: n for s, n in steps.items() if all(0 <= x <= MAX_STEP for x in s) and any(s)})
    best: list[list[tuple]] = []
    for step, _ in sorted(steps.items(), key=lambda kv: (-kv[1], max(kv[0]))):
        used: set[tuple[int, ...]] = set()
        chains = []
        for d in order:
            if d in used:
                continue
            chain = [tuple(x + lane * s for x, s in zip(d, step, strict=True)) for lane in range(width)]
            if all(c in by_delta and c not in used for c in chain):
                used.update(chain)
                chains.append([by_delta[c] for c in chain])
        if len(chains) > len(best):
            best = chains
        if len(best) * width == len(by_delta):   # every accumulator in a pack: no step does better
            break
    return best


@dataclass(eq=False)
class StorePack:
    """Stores of one straight-line block to `lanes` consecutive elements of one buffer, in lane order: one vector
    store of `values` (an upcast elementwise tile, a reduce tile's epilogue), rendered at the last of them."""
    stores: tuple[UOp, ...]
    values: tuple[UOp, ...]
    block: int


def strided(loads: tuple[UOp, ...]) -> tuple[tuple, int, int] | None:
    """(buffer and offset terms, first lane's constant offset, step) if direct loads `loads` read one buffer at
    offsets d, d + s, d + 2s, ... with a step s other than 0 and 1 (a column of a row-major tile), else None."""
    if not all(direct_load(u) for u in loads):
        return None
    base, first = split_offset(loads[0].src[0].src[1])
    buf = loads[0].src[0].src[0]
    step = split_offset(loads[1].src[0].src[1])[1] - first
    if step in (0, 1) or any(u.src[0].src[0] is not buf or split_offset(u.src[0].src[1]) != (base, first + i * step)
                             for i, u in enumerate(loads)):
        return None
    return (buf, base), first, step


def _direct_store(u: UOp) -> bool:
    return u.op is Ops.STORE and len(u.src) == 2 and u.src[0].op is Ops.INDEX and \
        u.src[0].src[0].op is Ops.DEFINE_GLOBAL


def find_store_packs(lin: list[UOp], lanes: Callable[[DType], int], vector_dtype: Callable[[DType], bool],
                     min_lanes: int = 4) -> list[StorePack]:
    """The runs of `lanes(dtype)` (or half that, down to `min_lanes`) stores side by side in one block of `lin` (no
    loop opens or closes between them). None in a kernel that reads a buffer it writes: a vector store is rendered
    where the run's last store is, after loads the scalar stores came before."""
    written = {u.src[0].src[0] for u in lin if u.op is Ops.STORE and u.src[0].op is Ops.INDEX}
    if any(u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and u.src[0].src[0] in written for u in lin):
        return []
    groups: dict[tuple, dict[int, UOp]] = {}
    block = 0
    for u in lin:
        if u.op in (Ops.RANGE, Ops.END):
            block += 1
        elif _direct_store(u) and vector_dtype(u.src[1].dtype):
            base, delta = split_offset(u.src[0].src[1])
            groups.setdefault((block, u.src[0].src[0], base), []).append((delta, u))
    out: list[StorePack] = []
    for (block, _, _), members in groups.items():
        run = dict(members)
        if len(run) < len(members):    # an element stored twice: the later store must stay after the earlier
            continue
        width = lanes(members[0][1].src[1].dtype)
        used: set[int] = set()
        while width >= min_lanes:
            for d in sorted(run):
                chain = range(d, d + width)
                if all(c in run and c not in used for c in chain):
                    used.update(chain)
                    stores = tuple(run[c] for c in chain)
                    out.append(StorePack(stores, tuple(st.src[1] for st in stores), block))
            width //= 2
    return out


__all__ = ["MAX_STEP", "Pack", "StorePack", "find_packs", "find_store_packs", "split_offset", "direct_load", "strided"]
