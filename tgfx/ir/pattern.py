"""`UPat`, `PatternMatcher` and `graph_rewrite`: the one mechanism for every transform and lowering pass."""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

from tgfx.dtypes import DType
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp


class UPat:
    """A pattern over UOps. `src` as a tuple matches in order; as a list, in any order (commutative ops)."""

    __slots__ = ("ops", "dtypes", "src", "arg", "name", "allow_any_len", "custom")

    def __init__(self, op: Ops | Iterable[Ops] | None = None, dtype: DType | Iterable[DType] | None = None,
                 src: tuple[UPat, ...] | list[UPat] | UPat | None = None, arg: Any = None, name: str | None = None,
                 allow_any_len: bool = False, custom: Callable[[UOp], bool] | None = None) -> None:
        self.ops = None if op is None else (frozenset({op}) if isinstance(op, Ops) else frozenset(op))
        self.dtypes = None if dtype is None else (frozenset({dtype}) if isinstance(dtype, DType) else frozenset(dtype))
        self.src = src
        self.arg, self.name, self.allow_any_len, self.custom = arg, name, allow_any_len, custom

    @staticmethod
    def var(name: str | None = None, dtype: DType | Iterable[DType] | None = None) -> UPat:
        return UPat(dtype=dtype, name=name)

    @staticmethod
    def cvar(name: str | None = None, dtype: DType | Iterable[DType] | None = None) -> UPat:
        return UPat(Ops.CONST, dtype=dtype, name=name)

    def match(self, u: UOp, store: dict[str, UOp]) -> list[dict[str, UOp]]:
        """The ways `u` matches, each as the captures so far plus this pattern's (`_NONE`, shared, when none)."""
        if self.ops is not None and u.op not in self.ops:
            return _NONE
        if self.dtypes is not None and u.dtype not in self.dtypes and (
                u.dtype is None or u.dtype.scalar not in self.dtypes):
            return _NONE
        if self.arg is not None and u.arg != self.arg:
            return _NONE
        if self.custom is not None and not self.custom(u):
            return _NONE
        if self.name is not None:
            bound = store.get(self.name)
            if bound is None:
                store = {**store, self.name: u}
            elif bound is not u:
                return _NONE
        src = self.src
        if src is None:
            return [store]
        if type(src) is tuple:   # in order: the common case, without building the permutations
            if len(src) != len(u.src) and not (self.allow_any_len and len(src) <= len(u.src)):
                return _NONE
            return _match_in_order(src, u.src, store)
        if isinstance(src, UPat):  # every source matches the same pattern
            return _match_in_order(tuple(src for _ in u.src), u.src, store)
        if len(src) != len(u.src):
            return _NONE
        out: list[dict[str, UOp]] = []
        for pats in itertools.permutations(src):
            out.extend(_match_in_order(pats, u.src, store))
        return out


_NONE: list[dict[str, UOp]] = []   # no match (never mutated)


def _match_in_order(pats: tuple[UPat, ...], srcs: tuple[UOp, ...], store: dict[str, UOp]) -> list[dict[str, UOp]]:
    stores = [store]
    for p, s in zip(pats, srcs, strict=False):
        stores = p.match(s, stores[0]) if len(stores) == 1 else [st2 for st in stores for st2 in p.match(s, st)]
        if not stores:
            return _NONE
    return stores


_memo_names = itertools.count()


class PatternMatcher:
    """An ordered list of `(UPat, fn)` rules; `fn(ctx?, **captures)` returns a replacement UOp or None.

    `pure=True` promises that, without a ctx, every rule's answer depends on the node alone (its structure and what is
    derived from it: bounds, shape): then a node's rewrite is the same in every graph, and `graph_rewrite` keeps it on
    the node (`memo`), so the next pass over a graph holding it (the lowering runs the index simplifier over each
    kernel after every stage, most of the graph unchanged) rewrites only what is new."""

    def __init__(self, rules: list[tuple[UPat, Callable[..., UOp | None]]], pure: bool = False) -> None:
        self.rules, self.pure = rules, pure
        # the attribute a node's rewrite is kept in (a fresh name per matcher: never one a dead matcher left behind)
        self.memo = f"_rewritten{next(_memo_names)}" if pure else None
        self.by_op: dict[Ops | None, list[tuple[UPat, Callable, bool, tuple, str | None]]] = {}
        for pat, fn in rules:
            wants_ctx = "ctx" in fn.__code__.co_varnames[:fn.__code__.co_argcount]
            # the ops an in-order pattern allows at each source: a node whose sources do not fit is passed over
            # without building captures (most rules fail on their sources' ops)
            early = tuple((i, p.ops) for i, p in enumerate(pat.src) if p.ops is not None) \
                if type(pat.src) is tuple and not pat.allow_any_len else ()
            # a pattern that only names a node of its ops (`UPat(GroupOp.ALU, name="x")`: the index simplifier's
            # constant folds, most of its rules' tries) matches every node it is tried on: its rule is called at once
            direct = pat.name if pat.src is None and pat.dtypes is None and pat.arg is None and pat.custom is None \
                else None
            for op in (pat.ops if pat.ops is not None else [None]):
                self.by_op.setdefault(op, []).append((pat, fn, wants_ctx, early, direct))
        # the ops some rule may match, unless a rule matches any op: a graph holding none of them is left as it is
        self.ops: frozenset[Ops] | None = None if None in self.by_op else frozenset(self.by_op)
        wild = self.by_op.get(None, [])
        for op in list(self.by_op):
            if op is not None:
                self.by_op[op] = self.by_op[op] + wild  # order within one op is kept; wildcards come last

    def __add__(self, other: PatternMatcher) -> PatternMatcher:
        return PatternMatcher(self.rules + other.rules, pure=self.pure and other.pure)

    def rewrite(self, u: UOp, ctx: Any = None) -> UOp | None:
        src = u.src
        for pat, fn, wants_ctx, early, direct in self.by_op.get(u.op, self.by_op.get(None, [])):
            if direct is not None:
                ret = fn(ctx=ctx, **{direct: u}) if wants_ctx else fn(**{direct: u})
                if ret is not None and ret is not u:
                    return ret
                continue
            if early and (len(src) != len(pat.src) or any(src[i].op not in ops for i, ops in early)):
                continue
            for store in pat.match(u, {}):
                ret = fn(ctx=ctx, **store) if wants_ctx else fn(**store)
                if ret is not None and ret is not u:
                    return ret
        return None


class RewriteError(RuntimeError):
    pass


def graph_rewrite(root: UOp, pm: PatternMatcher, ctx: Any = None, bottom_up: bool = False, name: str = "",
                  max_steps: int = 10_000_000) -> UOp:
    """Rewrite `root` with `pm` to a fixed point. Memoised; iterative, so graph depth is unbounded.

    Default order rewrites a node's sources first, then the node (repeatedly, until no rule matches).
    With `bottom_up=True` a node is rewritten before its sources are visited (tinygrad's naming: the rules
    see the node as the user built it).
    """
    memo = pm.memo if ctx is None and not bottom_up else None
    if memo is not None and (hit := root.__dict__.get(memo)) is not None:
        return root if hit is _SAME else hit
    order = root.toposort()
    if pm.ops is not None and pm.ops.isdisjoint(u.op for u in order):
        return root   # no rule can match (a kernel's order is kept on its SINK: this is one pass over a list)
    done: dict[UOp, UOp] = {}
    if bottom_up:
        return _kept_with(root, _rewrite(root, pm, ctx, True, name, max_steps, done))
    # the graph's own nodes in order, sources first (most are left as they are: no stack of visits for them); what
    # a rule returns is new, and is rewritten as a graph of its own, sharing what is done
    ops = pm.ops
    for n in order:
        if n in done:
            continue
        if memo is not None and (hit := n.__dict__.get(memo)) is not None:   # rewritten by an earlier pass
            done[n] = n if hit is _SAME else hit
            continue
        src = n.src
        new_src = tuple([done[s] for s in src])
        x = n if new_src == src else n.replace(src=new_src)
        if memo is not None and x is not n and (hit := x.__dict__.get(memo)) is not None:
            done[n] = x if hit is _SAME else hit
            continue
        new = x if ops is not None and x.op not in ops else _fixed_point(pm, x, ctx, name)
        if new is x:
            done[n] = x
            done.setdefault(x, x)
        else:
            done[n] = _rewrite(new, pm, ctx, False, name, max_steps, done, memo)
    if memo is not None:
        for n, r in done.items():
            n.__dict__[memo] = _SAME if r is n else r
    return _kept_with(root, done[root])


# While a program is lowered (`keep_rewritten`), the graphs rewritten and their results are kept: its kernels share
# nodes (loops of one size and their index math, a common operand), on which a rewrite keeps its memo and a pass its
# derived values, so that what one kernel's passes found the next one's find again (resnet's 142 kernels: 10% of
# their lowering's time). Released together at the end, freed by their reference counts.
_kept: list[UOp] | None = None


def _kept_with(root: UOp, result: UOp) -> UOp:
    if (kept := _kept) is not None:
        kept.append(root)
        kept.append(result)
    return result


def keep_rewritten() -> list[UOp] | None:
    """Keep the graphs rewritten from now on, until `release_rewritten(what this returned)`."""
    global _kept
    was, _kept = _kept, []
    return was


def release_rewritten(was: list[UOp] | None) -> None:
    global _kept
    _kept = was


# a node's memo when its rewrite is itself (storing the node would make a reference cycle, freed only by the collector)
_SAME = object()


def _rewrite(root: UOp, pm: PatternMatcher, ctx: Any, bottom_up: bool, name: str, max_steps: int,
             done: dict[UOp, UOp], memo: str | None = None) -> UOp:
    """`graph_rewrite` of `root` as a walk with an explicit stack (a node's sources are visited when it is, in either
    order), adding to `done`; a node rewritten by an earlier pass (its `memo`) is not visited again."""
    # stack entries: (node, stage, pending) ; stage 0 = visit, 1 = sources done, 2 = result pending
    stack: list[tuple[UOp, int, UOp | None]] = [(root, 0, None)]
    steps = 0
    while stack:
        steps += 1
        if steps > max_steps:
            raise RewriteError(f"graph_rewrite {name!r} did not reach a fixed point in {max_steps} steps")
        n, stage, pending = stack.pop()
        if n in done:
            continue
        if stage == 0 and memo is not None and (hit := n.__dict__.get(memo)) is not None:
            done[n] = n if hit is _SAME else hit
            continue
        if stage == 0:
            if bottom_up:
                new = _fixed_point(pm, n, ctx, name)
                if new is not n:
                    stack.append((n, 2, new))
                    stack.append((new, 0, None))
                    continue
            stack.append((n, 1, None))
            stack.extend((s, 0, None) for s in reversed(n.src) if s not in done)
        elif stage == 1:
            src = tuple(done[s] for s in n.src)
            x = n if src == n.src else n.replace(src=src)
            # in bottom_up mode the node was already rewritten; it only needs another look if its sources changed
            new = x if bottom_up and x is n else _fixed_point(pm, x, ctx, name)
            if new is x:
                done[n] = x
                done.setdefault(x, x)
            else:
                stack.append((n, 2, new))
                stack.append((new, 0, None))
        else:
            assert pending is not None
            if pending not in done:  # pending is on the stack below us only if it was a cycle
                stack.append((n, 2, pending))
                stack.append((pending, 0, None))
                continue
            done[n] = done[pending]
    return done[root]


def _fixed_point(pm: PatternMatcher, u: UOp, ctx: Any, name: str) -> UOp:
    for _ in range(1000):
        new = pm.rewrite(u, ctx)
        if new is None:
            return u
        u = new
    raise RewriteError(f"graph_rewrite {name!r}: a rule keeps rewriting {u.op} (no fixed point after 1000 steps)")
