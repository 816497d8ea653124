"""symbolic: fold constants and simplify index arithmetic using value bounds from RANGEs.

The rules keep integer semantics exact (IDIV and MOD truncate toward zero); rules that reason about division only
fire when the operands are known to be non-negative, where truncation and floor agree.
"""
from __future__ import annotations

import math
from typing import Any

from tgfx.dtypes import DType, cast_scalar
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.pattern import PatternMatcher, UPat, graph_rewrite
from tgfx.ir.uop import UOp, tdiv


# ---- evaluating an ALU op on Python scalars, with the dtype's semantics ----
def _tmod(a: int, b: int) -> int:
    return 0 if b == 0 else a - b * tdiv(a, b)


def _shift(x: int, n: int, left: bool, d: DType) -> int:
    if n < 0 or n >= d.bits:
        return 0 if left or x >= 0 else -1
    return x << n if left else x >> n


python_alu: dict[Ops, Any] = {
    Ops.NEG: lambda d, x: -x if not d.is_bool else x, Ops.ADD: lambda d, x, y: x + y, Ops.MUL: lambda d, x, y: x * y,
    Ops.IDIV: lambda d, x, y: tdiv(x, y), Ops.MOD: lambda d, x, y: _tmod(x, y), Ops.MAX: lambda d, x, y: max(x, y),
    Ops.CMPLT: lambda d, x, y: x < y, Ops.CMPNE: lambda d, x, y: x != y, Ops.CMPEQ: lambda d, x, y: x == y,
    Ops.AND: lambda d, x, y: x & y if not d.is_bool else x and y,
    Ops.OR: lambda d, x, y: x | y if not d.is_bool else x or y,
    Ops.XOR: lambda d, x, y: x ^ y if not d.is_bool else x != y,
    Ops.SHL: lambda d, x, y: _shift(x, y, True, d), Ops.SHR: lambda d, x, y: _shift(x, y, False, d),
    Ops.WHERE: lambda d, c, x, y: x if c else y,
}


class NotStatic(ValueError):
    """An index that reads memory (a gather's): no value without the data."""


def evaluate(u: UOp, env: dict[UOp, int]) -> int:
    """The integer value of index expression `u` with `env`'s ranges and thread ids (RANGE and SPECIAL nodes) at the
    given values, in the IR's semantics (`python_alu`: truncating division, bools as 0/1). A node `u` reaches with no
    value (a range `env` lacks) is a KeyError; a LOAD (a gather's index) raises `NotStatic`."""
    memo: dict[UOp, Any] = {}
    for x in u.toposort():
        if x in env:
            memo[x] = env[x]
        elif x.op is Ops.CONST:
            memo[x] = x.arg
        elif x.op is Ops.CAST:
            memo[x] = int(memo[x.src[0]])
        elif x.op in python_alu:
            memo[x] = python_alu[x.op](x.src[-1].dtype, *(memo[s] for s in x.src))
        elif x.op in (Ops.RANGE, Ops.SPECIAL):
            raise KeyError(f"{x.op} {x.arg} has no value")
        else:
            raise NotStatic(f"{x.op} in an index")
    return memo[u]


def fold_alu(x: UOp) -> UOp | None:
    """An integer or bool ALU op over constants becomes a constant (float math is left to the compiler)."""
    if x.op not in python_alu or not all(s.op is Ops.CONST for s in x.src):
        return None
    if not (x.dtype.is_int or x.dtype.is_bool) or not all(s.dtype.is_int or s.dtype.is_bool for s in x.src[-2:]):
        if x.op is not Ops.WHERE:
            return None
    return UOp.const(x.dtype, python_alu[x.op](x.src[-1].dtype, *[s.arg for s in x.src]))


def fold_bounds(x: UOp) -> UOp | None:
    """An integer/bool node whose bounds pin a single value is that value."""
    if x.op in (Ops.CONST, Ops.RANGE, Ops.DEFINE_GLOBAL, Ops.SPECIAL) or x.dtype is None:
        return None
    if not (x.dtype.is_int or x.dtype.is_bool) or x.op in (Ops.LOAD, Ops.INDEX, Ops.REDUCE):
        return None
    if x.vmin == x.vmax:
        return UOp.const(x.dtype, x.vmin)
    return None


def fold_cast(x: UOp, c: UOp) -> UOp | None:
    if x.dtype.is_float or c.dtype.is_float:
        return None
    return UOp.const(x.dtype, cast_scalar(c.arg, x.dtype))


# ---- sums of terms: (a*4 + b + 3) // 4 style rewrites ----
def sum_terms(x: UOp) -> list[UOp]:
    """The terms of a sum, left to right (nested ADDs flattened, iteratively: a long chain is fine). One walk, left
    source first: the index rules ask this of every integer ADD they see (flattening level by level rescanned the
    whole list at each level, 60k scans for the bench programs' kernels)."""
    if x.op is not Ops.ADD:
        return [x]
    terms: list[UOp] = []
    stack = [x]
    while stack:
        t = stack.pop()
        if t.op is Ops.ADD:
            stack.extend(reversed(t.src))
        else:
            terms.append(t)
    return terms


def _coef(t: UOp) -> tuple[UOp | None, int]:
    if t.op is Ops.CONST:
        return None, t.arg
    if t.op is Ops.MUL and t.src[1].op is Ops.CONST:
        return t.src[0], t.src[1].arg
    if t.op is Ops.NEG and t.dtype.is_int:   # a flipped axis's index: -r is r * -1 (its residue mod c is c - 1)
        return t.src[0], -1
    return t, 1


def _sum(ts: list[UOp], like: UOp) -> UOp:
    if not ts:
        return like.const_like(0)
    out = ts[0]
    for t in ts[1:]:
        out = out + t
    return out


def _term(base: UOp | None, k: int, like: UOp) -> UOp:
    """The term `base * k` (the constant k for no base), as `_coef` reads terms back."""
    return like.const_like(k) if base is None else base if k == 1 else base * k


def _term_over(t: UOp, k: int) -> UOp:
    """Term `t` (a constant, `base`, or `base * coef`) divided by `k`, which divides its coefficient."""
    base, coef = _coef(t)
    return _term(base, coef // k, t)


def _constants_added(terms: list[UOp], like: UOp) -> list[UOp]:
    """A sum's terms with its constants added into one, last (none if they cancel): `r*32 + 32 + s*16 + -32`, a range
    offset by its lower bound under a condition (`simplify_given_valid`), is r*32 + s*16, every term non-negative."""
    consts = [t for t in terms if t.op is Ops.CONST]
    if len(consts) < 2:
        return terms
    total = sum(t.arg for t in consts)
    return [t for t in terms if t.op is not Ops.CONST] + ([like.const_like(total)] if total else [])


def divide_sum(x: UOp, d: UOp) -> UOp | None:
    """(a*c*k + r) // c -> a*k + r // c when every part is non-negative."""
    c = d.arg
    if c <= 0 or x.vmin < 0 or x.op is not Ops.ADD:
        return None
    terms = _constants_added(sum_terms(x), x)
    if any(t.vmin < 0 for t in terms):
        return None
    quot = [t for t in terms if _coef(t)[1] % c == 0]
    rem = [t for t in terms if _coef(t)[1] % c]
    if not quot:
        # terms below a step k that divides c drop out: (a*1024 + b) // 131072 -> a // 128 for 0 <= b < 1024 (a row
        # index of a flattened (32, 128, 1024) read back as (4096, 1024))
        for k in sorted({_coef(t)[1] for t in terms if _coef(t)[0] is not None and c % _coef(t)[1] == 0}, reverse=True):
            big, small = [t for t in terms if _coef(t)[1] % k == 0], [t for t in terms if _coef(t)[1] % k]
            if big and small and _sum(small, x).vmax < k:
                return _sum([_term_over(t, k) for t in big], x) // (c // k)
        # a common factor of every term divides through: (a*4 + b*2) // 2
        g = math.gcd(math.gcd(*[_coef(t)[1] for t in terms]), c)
        return _sum([_term_over(t, g) for t in terms], x) // (c // g) if g > 1 else None
    quot = [_term_over(t, c) for t in quot]
    return _sum(quot, x) + (_sum(rem, x) // c) if rem else _sum(quot, x)


def mod_sum(x: UOp, d: UOp) -> UOp | None:
    """(a*(c*q + k) + r) % c -> (a*k + r) % c when every part is non-negative: each coefficient is taken modulo c,
    which often leaves a sum the bounds show is below c (a convolution window's `(ow + kw*(W+1)) % W` is ow + kw)."""
    c = d.arg
    if c <= 0 or x.vmin < 0 or x.op is not Ops.ADD:
        return None
    terms = _constants_added(sum_terms(x), x)
    if any(t.vmin < 0 for t in terms):
        return None
    keep = []
    for t in terms:
        base, k = _coef(t)
        if k % c == 0:
            continue
        keep.append(t if k < c else _term(base, k % c, x))
    if len(keep) == len(terms) and all(a is b for a, b in zip(keep, terms, strict=True)):
        return _mod_split(terms, c, x)
    return _sum(keep, x) % c


def _mod_split(terms: list[UOp], c: int, x: UOp) -> UOp | None:
    """(a*k + r) % c -> (a % (c // k)) * k + r for a step k that divides c and non-negative terms r below it: the
    multiple of k stays one below c, and r does not carry past it (an irfft's Hermitian pairing read its rows of 33
    as `(r + 33*row) % 132` with 0 <= r < 32: a 64-bit remainder an element; now `33 * (row % 4) + r`)."""
    steps = {_coef(t)[1] for t in terms if _coef(t)[0] is not None and 1 < _coef(t)[1] < c and c % _coef(t)[1] == 0}
    for k in sorted(steps, reverse=True):
        big, small = [t for t in terms if _coef(t)[1] % k == 0], [t for t in terms if _coef(t)[1] % k]
        if big and small and _sum(small, x).vmax < k:
            return (_sum([_term_over(t, k) for t in big], x) % (c // k)) * k + _sum(small, x)
    return None


def _nearest_residues(x: UOp, c: int) -> tuple[UOp, UOp] | None:
    """(q, s) with x = c * q + s, each coefficient taken to its nearest residue modulo c (a negative one where that is
    nearer: 128 = 129 - 1), when one was negative and s lies in [-c, c); else None. The flat index i * n + j of an
    n x n matrix read along its diagonal's stride n + 1 is (n + 1) * i + (j - i): its `% (n + 1)` and `// (n + 1)`
    are then a compare and a select, not a division of every element (a GP's gradient through `diag(chol)`, 128 x 128:
    55 us -> 9)."""
    q_terms: list[UOp] = []
    s_terms: list[UOp] = []
    negative = False
    for t in sum_terms(x):
        base, k = _coef(t)
        r = k % c
        if base is not None and r > c // 2:
            r, negative = r - c, True
        q = (k - r) // c
        q_terms += [_term(base, q, x)] if q else []
        s_terms += [_term(base, r, x)] if r else []
    if not negative:
        return None
    s = _sum(s_terms, x)
    return (_sum(q_terms, x), s) if -c <= s.vmin and s.vmax < c else None


def floor_divmod(x: UOp, d: UOp, want_mod: bool) -> UOp | None:
    """x // c or x % c for a sum x >= 0 whose nearest residues (`_nearest_residues`) leave s in [-c, c): the quotient
    is q, less 1 where s < 0, the remainder s, plus c where s < 0 (x >= 0: truncation is floor)."""
    c = d.arg
    if c <= 1 or x.vmin < 0 or x.op is not Ops.ADD or (split := _nearest_residues(x, c)) is None:
        return None
    q, s = split
    below = s < x.const_like(0)
    if want_mod:
        return below.where(s + c, s)
    return q + below.where(x.const_like(-1), x.const_like(0))


def fold_divmod_pair(x: UOp) -> UOp | None:
    """(a // c) * c * k + (a % c) * k -> a * k, anywhere in a sum (k = 1: (a // c) * c + a % c -> a)."""
    terms = sum_terms(x)
    for i, t in enumerate(terms):
        if t.op is Ops.MUL and t.src[1].op is Ops.CONST and t.src[0].op is Ops.IDIV and \
                t.src[0].src[1].op is Ops.CONST and t.src[1].arg % t.src[0].src[1].arg == 0:
            a, c, k = t.src[0].src[0], t.src[0].src[1], t.src[1].arg // t.src[0].src[1].arg
            for j, t2 in enumerate(terms):
                base, coef = _coef(t2)
                if j != i and coef == k and base is not None and base.op is Ops.MOD and base.src[0] is a and \
                        base.src[1] is c:
                    rest = [t3 for n, t3 in enumerate(terms) if n not in (i, j)]
                    return _sum([a if k == 1 else a * k, *rest], x)
    return None


def _nonneg(x: UOp) -> bool:
    return x.dtype.is_int and x.vmin >= 0


def _negated_where(m: UOp, a: UOp, b: UOp) -> UOp | None:
    """-where(m, a, b) as where(m, -a, -b) when both arms negate to no new op (each a negation or a constant)."""
    if not all(x.op is Ops.NEG or x.op is Ops.CONST and x.dtype.is_float for x in (a, b)):
        return None
    return m.where(*(x.src[0] if x.op is Ops.NEG else x.const_like(-x.arg) for x in (a, b)))


pm_symbolic = PatternMatcher([
    # constants
    (UPat(GroupOp.ALU, name="x"), fold_alu),
    (UPat(Ops.CAST, src=(UPat.cvar("c"),), name="x"), fold_cast),
    (UPat(GroupOp.ALU, name="x"), fold_bounds),
    # canonical order: constants on the right of commutative ops
    (UPat(GroupOp.Commutative, src=(UPat.cvar("c"), UPat.var("y")), name="x"),
     lambda x, c, y: None if y.op is Ops.CONST else x.replace(src=(y, c))),
    # identities (integers and bools; float identities are not exact for -0.0 and NaN)
    (UPat(Ops.ADD, src=(UPat.var("x"), UPat.cvar("c"))),
     lambda x, c: x if c.arg == 0 and not x.dtype.is_float else None),
    (UPat(Ops.MUL, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: x if c.arg == 1 and not x.dtype.is_float else
     (x.const_like(0) if c.arg == 0 and x.dtype.is_int else None)),
    (UPat(Ops.IDIV, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: x if c.arg == 1 else None),
    (UPat(Ops.MOD, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: x if x.dtype.is_int and 0 <= x.vmin and
     x.vmax < c.arg else None),
    # re-associate constants: (x + c1) + c2, (x * c1) * c2
    (UPat(Ops.ADD, src=(UPat(Ops.ADD, src=(UPat.var("x"), UPat.cvar("c1"))), UPat.cvar("c2"))),
     lambda x, c1, c2: x + (c1.arg + c2.arg) if x.dtype.is_int else None),
    (UPat(Ops.MUL, src=(UPat(Ops.MUL, src=(UPat.var("x"), UPat.cvar("c1"))), UPat.cvar("c2"))),
     lambda x, c1, c2: x * (c1.arg * c2.arg) if x.dtype.is_int else None),
    # (x + c1) // c or * c distribute for index math
    (UPat(Ops.MUL, src=(UPat(Ops.ADD, src=(UPat.var("x"), UPat.var("y"))), UPat.cvar("c"))),
     lambda x, y, c: x * c + y * c if x.dtype.is_int else None),
    # division and modulo of sums
    (UPat(Ops.IDIV, src=(UPat.var("x"), UPat.cvar("d"))), lambda x, d: divide_sum(x, d) if x.dtype.is_int else None),
    (UPat(Ops.MOD, src=(UPat.var("x"), UPat.cvar("d"))), lambda x, d: mod_sum(x, d) if x.dtype.is_int else None),
    (UPat(Ops.IDIV, src=(UPat.var("x"), UPat.cvar("d"))),
     lambda x, d: floor_divmod(x, d, False) if x.dtype.is_int else None),
    (UPat(Ops.MOD, src=(UPat.var("x"), UPat.cvar("d"))),
     lambda x, d: floor_divmod(x, d, True) if x.dtype.is_int else None),
    (UPat(Ops.IDIV, src=(UPat(Ops.IDIV, src=(UPat.var("x"), UPat.cvar("a"))), UPat.cvar("b"))),
     lambda x, a, b: x // (a.arg * b.arg) if _nonneg(x) and a.arg > 0 and b.arg > 0 else None),
    (UPat(Ops.IDIV, src=(UPat(Ops.MUL, src=(UPat.var("x"), UPat.cvar("a"))), UPat.cvar("b"))),
     lambda x, a, b: x * (a.arg // b.arg) if _nonneg(x) and b.arg > 0 and a.arg % b.arg == 0 else None),
    (UPat(Ops.MOD, src=(UPat(Ops.MUL, src=(UPat.var("x"), UPat.cvar("a"))), UPat.cvar("b"))),
     lambda x, a, b: x.const_like(0) if x.dtype.is_int and b.arg > 0 and a.arg % b.arg == 0 else None),
    (UPat(Ops.MOD, src=(UPat(Ops.MOD, src=(UPat.var("x"), UPat.cvar("a"))), UPat.cvar("b"))),
     lambda x, a, b: x % b.arg if _nonneg(x) and b.arg > 0 and a.arg % b.arg == 0 else None),
    (UPat(Ops.ADD, name="x"), lambda x: fold_divmod_pair(x) if x.dtype.is_int else None),
    # negations, exact for every dtype (a float's sign flips, -0.0 included): a concatenation's float pieces are
    # negated, padded with zeros and negated back, which leaves each piece as it was and -0.0 around it
    (UPat(Ops.NEG, src=(UPat(Ops.NEG, src=(UPat.var("x"),)),)), lambda x: x),
    (UPat(Ops.NEG, src=(UPat.cvar("c"),)), lambda c: c.const_like(-c.arg) if c.dtype.is_float else None),
    (UPat(Ops.NEG, src=(UPat(Ops.WHERE, src=(UPat.var("m"), UPat.var("a"), UPat.var("b"))),)), _negated_where),
    # masks
    (UPat(Ops.WHERE, src=(UPat.cvar("c"), UPat.var("a"), UPat.var("b"))), lambda c, a, b: a if c.arg else b),
    (UPat(Ops.WHERE, src=(UPat.var(), UPat.var("a"), UPat.var("b")), name="x"), lambda x, a, b: a if a is b else None),
    (UPat(Ops.AND, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: (x if c.arg else c) if x.dtype.is_bool else None),
    (UPat(Ops.AND, src=(UPat.var("x"), UPat.var("y"))), lambda x, y: x if x is y else None),
], pure=True)


# ---- an index read only where a condition holds, simplified within the bounds the condition puts on loops ----
def _narrowed(valid: UOp) -> dict[UOp, tuple[int, int]]:
    """The bounds the clauses `e < c` and `c < e` of condition `valid` (an AND of them) put on loop ranges, where
    narrower than the range's own: `e` a range, or a sum of multiples of ranges and a constant, each range bounded
    with the others at their extremes (`1 < r * 2 + s` with s < 2: r >= 1, a concatenation's second piece read
    through an interleave; `15 - r < 15`: r >= 1, the last rows of a flipped or wrapped axis)."""
    bounds: dict[UOp, tuple[int, int]] = {}
    for c in conjuncts(valid):
        if c.op is Ops.CMPLT and c.src[1].op is Ops.CONST:
            _bound_sum(c.src[0], None, c.src[1].arg - 1, bounds)
        elif c.op is Ops.CMPLT and c.src[0].op is Ops.CONST:
            _bound_sum(c.src[1], c.src[0].arg + 1, None, bounds)
    return {r: (lo, hi) for r, (lo, hi) in bounds.items() if lo <= hi and (lo, hi) != (0, r.src[0].arg - 1)}


def _range_coef(t: UOp) -> tuple[UOp | None, int]:
    """`_coef` of a sum's term, a negated range's multiple (`-r * 64`) as the range's (r, -64)."""
    b, k = _coef(t)
    if b is not None and b.op is Ops.NEG and b.dtype.is_int:
        return b.src[0], -k
    return b, k


def _bound_sum(e: UOp, lo: int | None, hi: int | None, bounds: dict[UOp, tuple[int, int]]) -> None:
    """Narrow `bounds` (range -> (lo, hi)) by `lo <= e <= hi` (either None: unbounded), for `e` a sum of non-zero
    multiples of distinct ranges and a constant; nothing for any other `e`. A negative multiple bounds its range from
    the other side (k * r >= a is r <= a // k)."""
    if not isinstance(lo, (int, type(None))) or not isinstance(hi, (int, type(None))):
        return
    if e.op is Ops.IDIV and e.src[1].op is Ops.CONST and e.src[1].arg > 0 and e.src[0].vmin >= 0:
        # lo <= x // k <= hi is k*lo <= x <= k*hi + k - 1 (x >= 0: truncation is floor): an interleave's slot `r // 2`
        k = e.src[1].arg
        _bound_sum(e.src[0], None if lo is None else lo * k, None if hi is None else hi * k + k - 1, bounds)
        return
    terms = [_range_coef(t) for t in sum_terms(e)]
    rs = [(b, k) for b, k in terms if b is not None]
    if not rs or any(b.op is not Ops.RANGE or k == 0 for b, k in rs) or len({b for b, _ in rs}) != len(rs):
        return
    const = sum(k for b, k in terms if b is None)

    def own(r: UOp) -> tuple[int, int]:
        return bounds.get(r, (0, r.src[0].arg - 1))

    def most(r: UOp, k: int) -> int:
        return max(k * own(r)[0], k * own(r)[1])

    def least(r: UOp, k: int) -> int:
        return min(k * own(r)[0], k * own(r)[1])
    for r, k in rs:
        r_lo, r_hi = own(r)
        if lo is not None:   # k * r >= lo - const - (the others at their most)
            a = lo - const - sum(most(b, kk) for b, kk in rs if b is not r)
            r_lo, r_hi = (max(r_lo, -(-a // k)), r_hi) if k > 0 else (r_lo, min(r_hi, a // k))
        if hi is not None:   # k * r <= hi - const - (the others at their least)
            a = hi - const - sum(least(b, kk) for b, kk in rs if b is not r)
            r_lo, r_hi = (r_lo, min(r_hi, a // k)) if k > 0 else (max(r_lo, -(-a // k)), r_hi)
        bounds[r] = (r_lo, r_hi)


def divmods(nodes: list[UOp]) -> int:
    """How many divisions and remainders `nodes` hold (what the index rewrites try to leave fewer of)."""
    return sum(u.op in (Ops.IDIV, Ops.MOD) for u in nodes)


def _within(x: UOp, bounds: dict[UOp, tuple[int, int]]) -> UOp | None:
    """`x` simplified as if each range r of `bounds` ran only over [lo, hi]: r becomes lo + r' (r' a range of
    hi - lo + 1) for the rules, and r - lo again after; a range `x` reads only negated (a flipped or wrapped axis's
    `-r`, bounded or not) becomes hi - r', so that every term the rules see is a non-negative multiple of a range.
    None unless that leaves fewer divisions and remainders."""
    nodes = x.toposort()
    if not (before := divmods(nodes)):
        return None
    deps = set(nodes)
    bounds = {r: b for r, b in bounds.items() if r in deps}
    negated = {r: neg for r in nodes if r.op is Ops.RANGE and r.src[0].op is Ops.CONST and
               (neg := UOp(Ops.NEG, r.dtype, (r,))) in deps and not any(r in u.src for u in nodes if u is not neg)}
    bounds |= {r: (0, r.src[0].arg - 1) for r in negated if r not in bounds}
    if not bounds:
        return None
    fresh = {r: UOp(Ops.RANGE, r.dtype, (UOp.const(r.dtype, hi - lo + 1),), (-1 - i, "given"))
             for i, (r, (lo, hi)) in enumerate(bounds.items())}
    into, back = {}, {}
    for r, (lo, hi) in bounds.items():
        if r in negated:   # -r = r' - hi, r' = hi - r
            into[negated[r]], back[fresh[r]] = fresh[r] + -hi if hi else fresh[r], negated[r] + hi if hi else negated[r]
        else:
            into[r], back[fresh[r]] = fresh[r] + lo if lo else fresh[r], r + -lo if lo else r
    inner = graph_rewrite(x.substitute(into), pm_symbolic, name="symbolic given valid")
    out = inner.substitute(back)
    return out if divmods(out.toposort()) < before else None


def simplify_given_valid(x: UOp, valid: UOp, idx: UOp) -> UOp | None:
    """`where(valid, idx, 0)` in index arithmetic: idx is used only where valid holds, so it may be simplified as if
    the loops valid bounds ran only there (`_within`). A read of one piece of a concatenation (the heads of q, k and
    v's gradients joined into one matrix) loses the divisions and remainders the full range needed
    (`(r % 32) + ((t + r // 128) % 64) * 32 + ((r + t * 128) // 8192) * 8192` under r < 128 is `r % 32 + t * 32`);
    kept only when it has fewer of them."""
    if not idx.dtype.is_int or not (bounds := _narrowed(valid)) or (out := _within(idx, bounds)) is None:
        return None
    return x.replace(src=(valid, out, x.src[2]))


def simplify_flipped_index(x: UOp) -> UOp | None:
    """A buffer's offset that reads a loop only negated (`-r`: a flipped axis, the last rows of a wrapped one, an FFT's
    negative frequencies), simplified with the loop running backwards (`_within`), where every term is a non-negative
    multiple of a loop and the division rules apply: `((r*2 + 1024 - s*64) // 2) % 1024` is `r + 512 + (15 - s)*32`."""
    buf, off = x.src[:2] if len(x.src) >= 2 else (None, None)
    if off is None or not off.dtype.is_int or off.op is Ops.WHERE or (out := _within(off, {})) is None:
        return None
    return x.replace(src=(buf, out, *x.src[2:]))


def simplify_masked_load(x: UOp, valid: UOp, ld: UOp) -> UOp | None:
    """`where(valid, load(buf[off]), other)`: the value loaded matters only where valid holds, so its offset may be
    simplified as if the loops valid bounds ran only there (`_within`), where the simplified offset stays in the
    buffer over the loops' whole ranges (the load runs everywhere). A read of the last rows of a wrapped axis (an
    FFT's negative frequencies, `x[:, -m:]`) through a complex value's interleave kept its offset's wrap-around
    divisions and remainders (three of each a read of fno's spectral gradient: 234 ms of LLVM for one kernel)."""
    index = ld.src[0]
    if len(ld.src) != 1 or index.op is not Ops.INDEX or len(index.src) != 2 or index.src[0].op is not Ops.DEFINE_GLOBAL:
        return None
    buf, off = index.src
    if not off.dtype.is_int or off.op is Ops.WHERE or not (bounds := _narrowed(valid)) or \
            (out := _within(off, bounds)) is None or out.vmin < 0 or out.vmax >= buf.arg[1]:
        return None
    return x.replace(src=(valid, ld.replace(src=(index.replace(src=(buf, out)),)), x.src[2]))


def simplify_given_branch(x: UOp, valid: UOp, a: UOp) -> UOp | None:
    """`where(valid, a, b)`: `a` matters only where valid holds, so a clause (a comparison) inside it may be simplified
    as if the loops valid bounds ran only there (`_within`). An interleave's even slots (`lax.associative_scan`'s
    levels) read a concatenation's second piece, `0 < r // 2`, whose padded read's clause
    `((r2 + 64 * (r // 2) - 64 + 192 * r0) // 32) % 6 < 5` is then `2 * ((r - 2) // 2) < 5`: no division in the inner
    loop nor a value varying along its lanes. (Indexes are left to the rules on their own conditions.)"""
    if not (bounds := _narrowed(valid)):
        return None
    new = {u: out for u in a.toposort(lambda u: () if u.op is Ops.INDEX else u.src)
           if u.op is Ops.CMPLT and (out := _within(u, bounds)) is not None}
    return x.replace(src=(valid, a.substitute(new), x.src[2])) if new else None


def conjuncts(c: UOp) -> list[UOp]:
    """The clauses of condition `c`, an AND of them (`c` itself when it is none)."""
    return conjuncts(c.src[0]) + conjuncts(c.src[1]) if c.op is Ops.AND and c.dtype.is_bool else [c]


def simplify_clauses(x: UOp) -> UOp | None:
    """A condition's clauses (an AND of them), each simplified given the others (a clause matters only where they
    hold): a padded read through an interleave, `1 < r*2 + s and ((r*32 + s*16 + lane - 32) // 16) % 2 < 1`, whose
    division the first clause makes exact (r >= 1), is `... and s < 1`, no longer varying along the lanes."""
    if not x.dtype.is_bool or len(clauses := conjuncts(x)) < 2:
        return None
    new = list(clauses)
    for i, c in enumerate(clauses):
        if divmods(c.toposort()) and (bounds := _narrowed(_all(clauses[:i] + clauses[i + 1:]))) and \
                (out := _within(c, bounds)) is not None:
            new[i] = out
    return _all(new) if any(a is not b for a, b in zip(new, clauses, strict=True)) else None


def _all(cs: list[UOp]) -> UOp:
    out = cs[0]
    for c in cs[1:]:
        out = UOp(Ops.AND, out.dtype, (out, c))
    return out


pm_given_valid = PatternMatcher([
    (UPat(Ops.WHERE, src=(UPat.var("valid"), UPat.var("idx"), UPat.cvar("zero")), name="x"),
     lambda x, valid, idx, zero: simplify_given_valid(x, valid, idx) if zero.arg == 0 else None),
    (UPat(Ops.INDEX, name="x"), simplify_flipped_index),
    (UPat(Ops.WHERE, src=(UPat.var("valid"), UPat(Ops.LOAD, name="ld"), UPat.var()), name="x"), simplify_masked_load),
    (UPat(Ops.AND, name="x"), simplify_clauses),
    (UPat(Ops.WHERE, src=(UPat.var("valid"), UPat.var("a"), UPat.var()), name="x"), simplify_given_branch),
], pure=True)
