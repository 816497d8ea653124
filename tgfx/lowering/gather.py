"""gather: a one-hot reduce over an indexed axis becomes one load at the index.

The front end writes `x[idx]` (take, take_along_axis, integer-array indexing, embedding lookups, a batch drawn from
a dataset by a permutation) as tensor ops: a sum over the indexed axis `r` of `where(idx == r, x[.., r, ..], 0)`.
Rangeified, that is a REDUCE(ADD) over a range whose body matches at most one step, so the kernel reads the whole
axis for every output: O(outputs x axis length). Here it becomes `where(0 <= idx < n, x[.., idx, ..], 0)`, O(outputs)
(tinygrad's reduce collapse does the same). The index is clamped into the axis inside the load (`where(valid, idx,
0)`), so an out-of-range entry reads element 0 and is masked, as a padded read is. The result is the same: the
one-hot sum adds -0.0s (float sums start at -0.0, and the front end fills with it) to the one value it picks, which
leaves every value as it is, a -0.0 too.
"""
from __future__ import annotations

import math

from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import PatternMatcher, UPat
from tgfx.ir.uop import UOp
from tgfx.lowering.linearize import range_deps
from tgfx.lowering.symbolic import conjuncts


def _matched_index(c: UOp, r: UOp) -> UOp | None:
    """`e` if `c` is `e == r` (either side, `r` possibly cast), else None."""
    if c.op is not Ops.CMPEQ:
        return None
    for a, b in (c.src, c.src[::-1]):
        if b is r or (b.op is Ops.CAST and b.src[0] is r and b.dtype.is_int and b.dtype.itemsize >= 4):
            return a
    return None


def _is_identity(x: UOp, op: Ops) -> bool:
    return x.op is Ops.CONST and ((op is Ops.ADD and x.arg == 0) or (op is Ops.MUL and x.arg == 1) or
                                  (op is Ops.MAX and x.dtype == dtypes.bool and x.arg is False))


def collapse_onehot(red: UOp) -> UOp | None:
    """REDUCE(where(e == r & rest, v, identity), r, *others) -> where(valid(e) & rest, v[r := e], identity), still
    reduced over `others`, for the first range `r` with such an `e` that no range of this reduce reads."""
    body, rngs = red.src[0], red.src[1:]
    if red.arg not in (Ops.ADD, Ops.MAX) or body.op is not Ops.WHERE or not _is_identity(body.src[2], red.arg):
        return None
    conds = conjuncts(body.src[0])
    for r in rngs:
        if r.op is not Ops.RANGE or r.src[0].op is not Ops.CONST:
            continue
        for k, c in enumerate(conds):
            e = _matched_index(c, r)
            if e is None or range_deps(e) & set(rngs):
                continue
            e = e.cast(r.dtype)
            valid = (e < r.src[0].arg) & (e < 0).ne(True) if not (0 <= e.vmin and e.vmax < r.src[0].arg) else None
            at = e if valid is None else valid.where(e, 0)
            rest = [x.substitute({r: at}) for j, x in enumerate(conds) if j != k]
            mask = valid
            for x in rest:
                mask = x if mask is None else mask & x
            value = body.src[1].substitute({r: at})
            out = value if mask is None else mask.where(value, body.src[2])
            others = tuple(x for x in rngs if x is not r)
            return UOp(Ops.REDUCE, red.dtype, (out, *others), red.arg) if others else out
    return None


def _digits(t: UOp, ranges: list[UOp]) -> dict[UOp, UOp]:
    """Each of `ranges` (sizes n_1 .. n_k) as a digit of a flat position t in [0, n_1 ... n_k), the last fastest."""
    out, stride = {}, 1
    for j, r in reversed(list(enumerate(ranges))):
        q = t // stride if stride > 1 else t
        out[r] = q % r.src[0].arg if j else q
        stride *= r.src[0].arg
    return out


def _flat_size(ranges: list[UOp]) -> int:
    return math.prod(r.src[0].arg for r in ranges)


_SCATTERS = (Ops.ADD, Ops.MAX, Ops.MUL)


def collapse_scatter(sink: UOp) -> UOp:
    """A kernel storing a scatter, `out[.., s, ..] = REDUCE(where(e == s & rest, v, identity), i)` with the index e
    varying along the reduce ranges i and not along the output range s (`fusion._scatter_reduce` stores each on its
    own), as two loops: the n outputs along s set to the identity, then one sequential loop over the m updates, update
    t reading out[.., e, ..] and storing it combined with v, where it lands (inside the axis and `rest`; elsewhere it
    stores back what it read). O(n + m) where the reduce compared every output with every update. One combined into
    an operand by its own reduction, `x + REDUCE(..)` (max, product), starts the rows from x, not the identity
    (`fusion._scatter_roots`). Several output ranges, each matched by its own index (`t[i[:, None], j[None, :]]`'s
    gradient: rows i[a] and columns j[b], reduced over a and b), are one position over all of them, and so are several
    reduce ranges.
    The updates' range is of kind "scatter": no option splits, reorders or vectorises it (its updates may hit one row
    twice); the other ranges (a row's features) stay loops."""
    if len(sink.src) != 1 or (st := sink.src[0]).op is not Ops.STORE:
        return sink
    top = st.src[1]
    if top.op is Ops.REDUCE:
        return _collapse_scatter(sink, st, top, None) or sink
    # combined into an operand (`x.at[idx].add(v)`, `fusion._scatter_roots`): the rows start from it (which may be a
    # reduce of the same kind itself: `c.sum(1).at[idx].add(v)`)
    for red, start in ((top.src[0], top.src[1]), (top.src[1], top.src[0])) if top.op in _SCATTERS else ():
        if red.op is Ops.REDUCE and red.arg is top.op and (out := _collapse_scatter(sink, st, red, start)) is not None:
            return out
    return sink


def _collapse_scatter(sink: UOp, st: UOp, red: UOp, start: UOp | None) -> UOp | None:
    """`collapse_scatter` of the store `st` of `red` (combined with `start`, when not None), or None when `red` is
    no scatter."""
    if red.arg not in _SCATTERS or len(red.src) < 2 or \
            any(i.op is not Ops.RANGE or i.src[0].op is not Ops.CONST for i in red.src[1:]):
        return None
    body, reds = red.src[0], list(red.src[1:])
    if body.op is Ops.WHERE and _is_identity(body.src[2], red.arg):
        cond, value, ident = body.src
    elif body.op is Ops.WHERE and red.arg is Ops.MAX and body.src[2].op is Ops.CONST and \
            body.src[2].arg <= body.src[1].vmin:   # (below every value: -inf, the smallest int, -1 below positions)
        cond, value, ident = body.src
    elif red.arg is Ops.MAX and body.dtype == dtypes.bool:
        cond, value, ident = body, UOp.const(dtypes.bool, True), UOp.const(dtypes.bool, False)
    else:
        return None
    index = st.src[0]
    conds = conjuncts(cond)
    outs = [r for r in range_deps(index.src[1]) if r.arg[1] == "loop" and r.src[0].op is Ops.CONST]
    matched: dict[UOp, tuple[int, UOp]] = {}   # output range -> (its condition, the index it is matched with)
    for k, c in enumerate(conds):
        for r in outs:
            e = _matched_index(c, r)
            if r not in matched and e is not None and r not in range_deps(e) and set(reds) & range_deps(e):
                matched[r] = (k, e)
                break
    rs = sorted(matched, key=lambda r: r.arg[0])
    rest = [c for k, c in enumerate(conds) if k not in {k for k, _ in matched.values()}]
    if not rs or not set(reds) <= set().union(*(range_deps(e) for _, e in matched.values())) or \
            any(r in range_deps(x) for r in rs for x in (*rest, value, *(e for _, e in matched.values()))):
        return None
    n, m = _flat_size(rs), _flat_size(reds)
    # range ids spread out (each doubled), so that the rows' loop and the updates' loop both take the outermost
    # output range's place, outside a row's features: the rows are set in one loop (a plain loop, vectorised), then
    # each update reads and writes its row whole
    spread = {u: UOp(Ops.RANGE, u.dtype, u.src, (2 * u.arg[0], u.arg[1]))
              for u in sink.toposort() if u.op is Ops.RANGE}
    index, value = index.substitute(spread), value.substitute(spread)
    rest = [x.substitute(spread) for x in rest]
    rs, reds = [spread[r] for r in rs], [spread[i] for i in reds]
    ats = {spread[r]: e.substitute(spread) for r, (_, e) in matched.items()}
    place = rs[0].arg[0]
    rows = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, n),), (place, "loop"))
    first = ident if start is None else start.substitute(spread).substitute(_digits(rows, rs))
    init = UOp(Ops.STORE, None, (index.replace(src=(index.src[0], index.src[1].substitute(_digits(rows, rs)))),
                                 first))
    t = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, m),), (place + 1, "scatter"))
    step = _digits(t, reds)
    ats = {r: ats[r].cast(dtypes.index).substitute(step) for r in rs}
    lands = None
    for r, at in ats.items():
        inside = (at < r.src[0].arg) & (at < 0).ne(True)
        lands = inside if lands is None else lands & inside
    for x in rest:
        lands = lands & x.substitute(step)
    ix = index.replace(src=(index.src[0], index.src[1].substitute(
        {r: lands.where(at, UOp.const(dtypes.index, 0)) for r, at in ats.items()})))
    old = UOp(Ops.LOAD, red.dtype, (ix,))
    v = value.substitute(step)
    new = old.alu(Ops.OR, v) if red.dtype == dtypes.bool else UOp(red.arg, red.dtype, (old, v))
    return sink.replace(src=(init, UOp(Ops.STORE, None, (ix, lands.where(new, old)))))

pm_gather = PatternMatcher([
    (UPat(Ops.REDUCE, name="red"), collapse_onehot),
], pure=True)
