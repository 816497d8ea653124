"""einsum and tensordot as broadcast multiplies and sums over the contracted labels, so they fuse like matmul.

Every operand is laid out over one shared list of labels (kept labels first, then summed ones), with size-1 axes
where it lacks a label; their broadcast product summed over the summed labels is one kernel. With more than two
operands the contraction goes pairwise in a greedy order (the pair whose result is smallest first), one kernel per
pair, unless `optimize=False` asks for the single fused product over every label at once. Repeated labels within one
operand (diagonals, traces) are taken by movement ops first, at no cost.
"""
from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from typing import Any

from tgfx.ir.ops import Ops
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _reduce
from tgfx.tensor import ArrayLike, Tensor, normalize_axis, prod, promote, static_int, to_tensor

Label = Hashable


# ---- parsing ----
def _parse_term(term: str, ndim: int, which: str) -> tuple[list[Label], int]:
    """Labels of one operand's subscripts; its '...' stands for the ndim - len(letters) leading axes it covers."""
    if term.count("...") > 1 or "." in term.replace("...", ""):
        raise ValueError(f"einsum: invalid subscripts {term!r} for {which}: at most one ellipsis '...'")
    bad = [c for c in term.replace("...", "") if not c.isalpha()]
    if bad:
        raise ValueError(f"einsum: invalid subscript {bad[0]!r} in {term!r} for {which}; subscripts are letters")
    letters = len(term.replace("...", ""))
    if "..." not in term:
        if letters != ndim:
            raise ValueError(f"einsum: {which} has {ndim} dimensions but its subscripts {term!r} give {letters}")
        return list(term), 0
    n_ell = ndim - letters
    if n_ell < 0:
        raise ValueError(f"einsum: {which} has {ndim} dimensions, fewer than the {letters} letters of {term!r}")
    head, tail = term.split("...")
    return list(head) + [("...", -n_ell + k) for k in range(n_ell)] + list(tail), n_ell


def _parse(subscripts: str, ts: Sequence[Tensor]) -> tuple[list[list[Label]], list[Label]]:
    s = subscripts.replace(" ", "")
    lhs, arrow, out = s.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ts):
        raise ValueError(f"einsum: {len(terms)} operand subscripts in {subscripts!r} but {len(ts)} operands given")
    labels, n_ell = [], 0
    for k, (term, t) in enumerate(zip(terms, ts, strict=True)):
        lab, e = _parse_term(term, t.ndim, f"operand {k}")
        labels.append(lab)
        n_ell = max(n_ell, e)
    ell = [("...", -n_ell + k) for k in range(n_ell)]
    if arrow:
        if "..." not in out:   # the broadcast axes, if any, are summed (as JAX's and numpy's optimize=True)
            out_labels = _parse_term(out, len(out), "the output")[0]
        else:
            out_labels = _parse_term(out, len(out.replace("...", "")) + n_ell, "the output")[0]
        seen = [lab for lab in out_labels if not isinstance(lab, tuple)]
        for c in seen:
            if seen.count(c) > 1:
                raise ValueError(f"einsum: output subscript {c!r} appears more than once in {subscripts!r}")
            if not any(c in lab for lab in labels):
                raise ValueError(f"einsum: output subscript {c!r} never appears in an input of {subscripts!r}")
    else:  # implicit: broadcast axes, then the letters that appear exactly once, alphabetically
        letters = [c for lab in labels for c in lab if not isinstance(c, tuple)]
        out_labels = ell + sorted(c for c in set(letters) if letters.count(c) == 1)
    return labels, out_labels


def _interleaved(args: Sequence[Any]) -> tuple[str, list[Any]]:
    """numpy's einsum(op0, sublist0, op1, sublist1, ..., [sublistout]) as a subscripts string."""
    ops, subs = list(args[0::2]), list(args[1::2])
    out = None
    if len(ops) > len(subs):
        out = ops.pop()
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def term(sub: Sequence[Any]) -> str:
        return "".join("..." if s is Ellipsis else letters[int(s)] for s in sub)
    spec = ",".join(term(s) for s in subs) + ("" if out is None else "->" + term(out))
    return spec, ops


# ---- contraction ----
def _diagonal(t: Tensor, labels: list[Label], fn: str) -> tuple[Tensor, list[Label]]:
    """Merge repeated labels of one operand into one axis: its diagonal, by movement ops only."""
    while len(set(labels)) != len(labels):
        lab = next(c for c in labels if labels.count(c) > 1)
        a, b = [i for i, c in enumerate(labels) if c == lab][:2]
        n = t.shape[a]
        if t.shape[b] != n:
            raise ValueError(f"{fn}: dimensions in single operand for collapsing index {lab!r} don't match "
                             f"({n} != {t.shape[b]})")
        others = [i for i in range(t.ndim) if i not in (a, b)]
        m = t.permute(*others, a, b).reshape(tuple(t.shape[i] for i in others) + (n * n,))
        # element (i, i) sits at i*(n+1): pad by n, view as rows of n+1, keep the first column
        m = m.pad_zeros(((0, 0),) * len(others) + ((0, n),)).reshape(m.shape[:-1] + (n, n + 1))
        m = m.shrink(tuple((0, s) for s in m.shape[:-1]) + ((0, 1),)).reshape(m.shape[:-1])
        t, labels = m, [labels[i] for i in others] + [lab]
    return t, labels


def _sizes(ts: Sequence[Tensor], labels: Sequence[Sequence[Label]], fn: str) -> dict[Label, int]:
    sizes: dict[Label, int] = {}
    for k, (t, lab) in enumerate(zip(ts, labels, strict=True)):
        for c, n in zip(lab, t.shape, strict=True):
            old = sizes.get(c)
            if old is None or old == 1:
                sizes[c] = n
            elif n not in (1, old):
                name = f"subscript {c!r}" if isinstance(c, str) else "a broadcast dimension"
                raise ValueError(f"{fn}: operand {k} has size {n} for {name}, which does not match size {old} "
                                 f"in an earlier operand")
    return sizes


def _product_sum(ts: Sequence[Tensor], labels: Sequence[Sequence[Label]], keep: Sequence[Label],
                 sizes: dict[Label, int]) -> Tensor:
    """sum over the labels not in `keep` of the broadcast product of the operands; axes in `keep`'s order."""
    summed = [c for c in dict.fromkeys(c for lab in labels for c in lab) if c not in keep]
    order = list(keep) + summed
    full = tuple(sizes[c] for c in order)
    d = ts[0].dtype
    if len(ts) == 1 and not summed:  # only a transpose
        return ts[0].permute(*(labels[0].index(c) for c in keep))
    if prod(full) == 0:  # an empty result, or a sum of nothing
        return Tensor.full(tuple(sizes[c] for c in keep), 0, d)
    if (wide := _reduce.half_compute(d)) is not None and len(order) > len(keep):  # float32 sums, as matmul's
        return _product_sum([t.widened(wide) for t in ts], labels, keep, sizes).astype(d)
    prod_t = None
    for t, lab in zip(ts, labels, strict=True):
        present = [c for c in order if c in lab]
        v = t.permute(*(lab.index(c) for c in present))
        v = v.reshape(tuple(v.shape[present.index(c)] if c in lab else 1 for c in order)).expand(full)
        prod_t = v if prod_t is None else ew.multiply(prod_t, v)
    axes = tuple(range(len(keep), len(order)))
    return prod_t._reduce(Ops.MAX if d.is_bool else Ops.ADD, axes, False) if axes else prod_t


def contract(ts: Sequence[Tensor], labels: Sequence[Sequence[Label]], out: Sequence[Label],
             optimize: bool | str = "greedy", fn: str = "einsum") -> Tensor:
    """The einsum of operands with the given (hashable) labels per axis, into the `out` labels."""
    ts = list(ts)
    if len(ts) > 1:  # one result dtype for all (JAX's promotion), as einsum's products would give
        first = ts[0]
        for t in ts[1:]:
            first, _ = promote(first, t, fn)
        ts = [t.astype(first.dtype) for t in ts]
    pairs = [_diagonal(t, list(lab), fn) for t, lab in zip(ts, labels, strict=True)]
    ts, labels = [p[0] for p in pairs], [p[1] for p in pairs]
    sizes = _sizes(ts, labels, fn)
    out = list(out)
    while optimize and len(ts) > 2:
        best = None
        for i, j in itertools.combinations(range(len(ts)), 2):
            needed = set(out).union(*(labels[k] for k in range(len(ts)) if k not in (i, j)))
            keep = [c for c in dict.fromkeys(labels[i] + labels[j]) if c in needed]
            cost = prod(sizes[c] for c in keep)
            if best is None or cost < best[0]:
                best = (cost, i, j, keep)
        _, i, j, keep = best
        merged = _product_sum([ts[i], ts[j]], [labels[i], labels[j]], keep, sizes)
        ts = [t for k, t in enumerate(ts) if k not in (i, j)] + [merged]
        labels = [lab for k, lab in enumerate(labels) if k not in (i, j)] + [keep]
    return _product_sum(ts, labels, out, sizes)


def einsum(subscripts: str | ArrayLike, *operands: ArrayLike, optimize: bool | str = "greedy",
           precision: Any = None, preferred_element_type: Any = None) -> Tensor:
    """numpy.einsum: Einstein summation over the labelled axes of the operands.

    Explicit (`"ij,jk->ik"`) and implicit (`"ij,jk"`: letters that appear once, alphabetically) outputs, repeated
    labels within an operand for diagonals and traces (`"ii->i"`, `"ii"`), `...` for broadcast leading axes, and
    numpy's interleaved form `einsum(x, [0, 1], y, [1, 2])`. The result dtype is the operands' promoted dtype (JAX's
    rule: bool stays bool, int8 stays int8); with `preferred_element_type` the operands are cast to it first, so the
    sums accumulate in it. `precision` is accepted for JAX compatibility and ignored.

    Cost: one kernel per pairwise contraction (for two operands, one kernel over every label's range, like matmul);
    `optimize=False` fuses any number of operands into one kernel over all labels at once.

    >>> tnp.einsum("ij,jk->ik", tnp.ones((2, 3)), tnp.ones((3, 4))).shape
    (2, 4)
    """
    if not isinstance(subscripts, str):
        subscripts, ops = _interleaved((subscripts, *operands))
        operands = tuple(ops)
    ts = [to_tensor(o) for o in operands]
    if not ts:
        raise ValueError("einsum: at least one operand is needed")
    if preferred_element_type is not None:  # accumulate in it, as JAX does
        ts = [t.astype(preferred_element_type) for t in ts]
    labels, out = _parse(subscripts, ts)
    return contract(ts, labels, out, optimize)


def tensordot(a: ArrayLike, b: ArrayLike, axes: int | Sequence[int] | Sequence[Sequence[int]] = 2) -> Tensor:
    """numpy.tensordot: sum of products over `axes` of a and b; the result has a's free axes then b's.

    `axes=N` pairs a's last N axes with b's first N; `axes=(a_axes, b_axes)` names them. One kernel.
    """
    x, y = to_tensor(a), to_tensor(b)
    if static_int(axes) is not None:
        axes = static_int(axes)
        if axes < 0 or axes > min(x.ndim, y.ndim):
            raise ValueError(f"tensordot: axes={axes} must be between 0 and the operands' dimensions "
                             f"({x.ndim} and {y.ndim})")
        ax, bx = list(range(x.ndim - axes, x.ndim)), list(range(axes))
    else:
        ax_raw, bx_raw = axes
        ax = [ax_raw] if static_int(ax_raw) is not None else list(ax_raw)
        bx = [bx_raw] if static_int(bx_raw) is not None else list(bx_raw)
        if len(ax) != len(bx):
            raise ValueError(f"tensordot: axes {axes} pair {len(ax)} axes of a with {len(bx)} axes of b")
        ax = [normalize_axis(i, x.ndim, "tensordot") for i in ax]
        bx = [normalize_axis(i, y.ndim, "tensordot") for i in bx]
    for i, j in zip(ax, bx, strict=True):
        if x.shape[i] != y.shape[j]:
            raise ValueError(f"tensordot: shape mismatch for sum: axis {i} of a (shape {x.shape}) has size "
                             f"{x.shape[i]}, axis {j} of b (shape {y.shape}) has size {y.shape[j]}")
    la = [("c", ax.index(i)) if i in ax else ("a", i) for i in range(x.ndim)]
    lb = [("c", bx.index(j)) if j in bx else ("b", j) for j in range(y.ndim)]
    out = [c for c in la if c[0] == "a"] + [c for c in lb if c[0] == "b"]
    return contract([x, y], [la, lb], out, fn="tensordot")
