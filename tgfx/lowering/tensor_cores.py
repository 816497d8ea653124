"""tensor_cores: float16 and bfloat16 contractions on the GPU's tensor cores (the TC option).

A contraction `sum_k CAST(a) * CAST(b)` of two float16 (or two bfloat16) operands summed in float32 (jax's default:
`preferred_element_type` float32, the result stored in the operands' dtype) is computed by warps, each a 16 x 8 tile
of the outputs with one `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32` per 16 steps of the
reduce. The op, `Ops.WMMA`, is what one lane of the warp sees: its fragments of A (16 x 16, row-major: rows the
outputs along M, columns the steps), of B (16 x 8: the steps by the outputs along N) and of C (16 x 8, float32), and
element i of its fragment of D = A @ B + C. Which lane holds which elements is PTX's (ISA, "Matrix Fragments for
mma.m16n8k16 with floating point type"), for lane l with g = l // 4 and t = l % 4:

- A: a_i (i = 0..7) is row g + 8 * (i // 2 % 2), column 2 * t + i % 2 + 8 * (i // 4);
- B: b_i (i = 0..3) is row (step) 2 * t + i % 2 + 8 * (i // 2), column g;
- C and D: c_i (i = 0..3) is row g + 8 * (i // 2), column 2 * t + i % 2.

TC(axis, warps) rewrites the index-level kernel: the output axes only A's operand depends on become one axis M, those
only B's depends on one axis N, the reduce's ranges one axis K (each merged axis's index the quotients and
remainders of the ranges' it stands for), the axes both depend on one batch axis. The launch: a warp's 32 lanes along
x (the SPECIAL "lidx0"), the tiles along N on grid axis y and along M on z, `warps` warps a block between them, a
block a batch index on x. Each lane loops over K 16 steps at a time, reads its fragments' elements (plain loads of
the operands' expressions at the element's row and column, 0 past an axis's end: edges are masked, no shape is
refused for its size), and sums `WMMA` into its four accumulators; after the loop it stores its four elements of the
tile with the kernel's own epilogue (its store and whatever it computes from the sum), gated past the edges.

On the CPU (`expand_wmma`, in `optimize_gpu.thread_loops`) the op is the sum it stands for: c_i plus sixteen
products, each element of A and B read as the lane that holds it reads it (its expression with that lane's id), so
the emulated run checks the layout, the masks and the epilogue against numpy. The CPU's own kernels never see it.
"""
from __future__ import annotations

import math
from typing import NamedTuple

from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.kernel_opts import KernelOptError, Opt, ranges
from tgfx.lowering.linearize import range_deps

TILE_M, TILE_N, TILE_K = 16, 8, 16   # the instruction's shape (m16n8k16)
WARP = 32
HALVES = (dtypes.float16, dtypes.bfloat16)
LANE = "lidx0"   # the SPECIAL of a lane of the warp (the renderer's tid.x)
TC_WARPS = 4     # warps a block the heuristics give (`tensor_core_opts`)


def a_element(i: int, g: UOp | int, t: UOp | int) -> tuple[UOp | int, UOp | int]:
    """(row, column) of A that element a_i of lane (g, t) holds."""
    return g + 8 * (i // 2 % 2), t * 2 + i % 2 + 8 * (i // 4)


def b_element(i: int, g: UOp | int, t: UOp | int) -> tuple[UOp | int, UOp | int]:
    """(row, column) of B that element b_i of lane (g, t) holds."""
    return t * 2 + i % 2 + 8 * (i // 2), g


def c_element(i: int, g: UOp | int, t: UOp | int) -> tuple[UOp | int, UOp | int]:
    """(row, column) of C (and D) that element c_i of lane (g, t) holds."""
    return g + 8 * (i // 2), t * 2 + i % 2


class Contraction(NamedTuple):
    """A kernel that is one half-precision contraction: its REDUCE, the two operands (before their casts to float32),
    and its ranges by role, each list in loop order."""
    red: UOp
    a: UOp
    b: UOp
    m: list[UOp]
    n: list[UOp]
    batch: list[UOp]
    k: list[UOp]


def _size(rs: list[UOp]) -> int:
    return math.prod(r.src[0].arg for r in rs)


def contraction(sink: UOp) -> Contraction | None:
    """The kernel as a tensor-core contraction, or None: one store of one float32 REDUCE(ADD) of a product of two
    operands cast from one half dtype (or of their half product cast), over reduce ranges only, with output axes
    only the first operand depends on (M) and ones only the second does (N)."""
    if len(sink.src) != 1 or sink.src[0].op is not Ops.STORE:
        return None
    nodes = sink.toposort()
    reds = [u for u in nodes if u.op is Ops.REDUCE]
    if len(reds) != 1 or any(u.op in (Ops.SPECIAL, Ops.DEFINE_LOCAL, Ops.DEFINE_REG, Ops.WMMA) for u in nodes):
        return None
    red = reds[0]
    value = red.src[0]
    if red.arg is not Ops.ADD or red.dtype != dtypes.float32:
        return None
    if value.op is Ops.CAST and value.src[0].op is Ops.MUL and value.src[0].dtype in HALVES:
        # a product rounded to the half dtype before the float32 sum (a convolution's): the tensor core's is exact,
        # as XLA's and cuDNN's convolutions on a GPU are
        xs = list(value.src[0].src)
    elif value.op is Ops.MUL:
        xs = [f.src[0] for f in value.src if f.op is Ops.CAST and f.src[0].dtype in HALVES]
    else:
        return None
    if len(xs) != 2 or xs[0].dtype != xs[1].dtype:
        return None
    rngs = sorted(ranges(sink).values(), key=lambda r: r.arg[0])
    k = [r for r in rngs if r in red.src[1:]]
    loops = [r for r in rngs if r.arg[1] == "loop"]
    if len(k) != len(red.src) - 1 or any(r.arg[1] != "reduce" for r in k) or len(loops) + len(k) != len(rngs):
        return None
    da, db = range_deps(xs[0]), range_deps(xs[1])
    m = [r for r in loops if r in da and r not in db]
    n = [r for r in loops if r in db and r not in da]
    if not n or not m:
        return None
    return Contraction(red, xs[0], xs[1], m, n, [r for r in loops if r not in m and r not in n], k)


def _digits(rs: list[UOp], index: UOp) -> dict[UOp, UOp]:
    """Each of ranges `rs` (loop order) as its digit of `index`, their merged index (the last range fastest)."""
    out, inner, total = {}, 1, _size(rs)
    for r in reversed(rs):
        size = r.src[0].arg
        quotient = index // inner if inner > 1 else index
        out[r] = quotient % size if inner * size < total else quotient
        inner *= size
    return out


def _masked(index: UOp, size: int, tile: int, steps: int) -> tuple[UOp, UOp | None]:
    """`index` of an axis of `size` padded to `steps` tiles of `tile`: (the index, 0 past the end, and whether it is
    inside, None where no tile passes the end)."""
    if steps * tile == size:
        return index, None
    inside = index < size
    return inside.where(index, 0), inside


def _all(conds: list[UOp | None]) -> UOp | None:
    out = None
    for c in conds:
        out = c if out is None else out if c is None else out & c
    return out


def tensor_core(sink: UOp, opt: Opt) -> UOp:
    """TC(axis, warps): the contraction over reduce range `axis` on tensor cores, `warps` warps a block (see the
    module's docstring). Applied alone, to a kernel without thread ids."""
    c = contraction(sink)
    if c is None or opt.axis not in (r.arg[0] for r in c.k):
        raise KernelOptError(f"{opt}: not a float16/bfloat16 contraction summed in float32 over range {opt.axis}")
    warps = opt.amount
    if warps < 1 or warps & (warps - 1) or warps * WARP > 1024:
        raise KernelOptError(f"{opt}: warps a block must be a power of two, at most 32")
    msize, nsize, ksize, bsize = _size(c.m), _size(c.n), _size(c.k), _size(c.batch)
    mt, nt, kt = -(-msize // TILE_M), -(-nsize // TILE_N), -(-ksize // TILE_K)
    wn = min(warps, 1 << (nt - 1).bit_length())
    wm = min(warps // wn, 1 << (mt - 1).bit_length())
    lane = UOp(Ops.SPECIAL, dtypes.index, (), (LANE, WARP))
    tn = UOp(Ops.SPECIAL, dtypes.index, (), ("gidx1", nt, wn))
    tm = UOp(Ops.SPECIAL, dtypes.index, (), ("gidx2", mt, wm))
    batch = _digits(c.batch, UOp(Ops.SPECIAL, dtypes.index, (), ("gidx0", bsize, 1))) if bsize > 1 else \
        {r: UOp.const(dtypes.index, 0) for r in c.batch}
    fresh = 1 + max(r.arg[0] for r in ranges(sink).values())
    ko = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, kt),), (fresh, "reduce"))
    g, t = lane // 4, lane % 4

    def element(x: UOp, rows: list[UOp], row: UOp, row_size: int, row_tile: int, row_steps: int,
                cols: list[UOp], col: UOp, col_size: int, col_tile: int, col_steps: int) -> UOp:
        """Operand `x` at (row, column) of its fragment's matrix: 0 past either axis's end."""
        r, r_in = _masked(row, row_size, row_tile, row_steps)
        q, q_in = _masked(col, col_size, col_tile, col_steps)
        v = x.substitute({**_digits(rows, r), **_digits(cols, q), **batch})
        inside = _all([r_in, q_in])
        return v if inside is None else inside.where(v, v.const_like(0))

    a_frag, b_frag = [], []
    for i in range(8):   # A: M by K
        row, col = a_element(i, g, t)
        a_frag.append(element(c.a, c.m, tm * TILE_M + row, msize, TILE_M, mt, c.k, ko * TILE_K + col, ksize, TILE_K,
                              kt))
    for i in range(4):   # B: K by N
        row, col = b_element(i, g, t)
        b_frag.append(element(c.b, c.k, ko * TILE_K + row, ksize, TILE_K, kt, c.n, tn * TILE_N + col, nsize, TILE_N,
                              nt))
    zero = UOp.const(dtypes.float32, 0.0)
    store = sink.src[0]
    stores = []
    for i in range(4):
        mma = UOp(Ops.WMMA, dtypes.float32, (*a_frag, *b_frag, zero, zero, zero, zero), i)
        acc = UOp(Ops.REDUCE, dtypes.float32, (mma, ko), Ops.ADD)
        row, col = c_element(i, g, t)
        m, m_in = _masked(tm * TILE_M + row, msize, TILE_M, mt)
        n, n_in = _masked(tn * TILE_N + col, nsize, TILE_N, nt)
        st = store.substitute({c.red: acc, **_digits(c.m, m), **_digits(c.n, n), **batch})
        gate = _all([st.src[2] if len(st.src) == 3 else None, m_in, n_in])
        stores.append(st if gate is None else st.replace(src=(*st.src[:2], gate)))
    return sink.replace(src=tuple(stores))


def tensor_core_opts(sink: UOp, target: object) -> list[Opt] | None:
    """TC for a half-precision contraction on a GPU with `mma.sync` m16n8k16 (sm_80 and newer) whose output tiles
    are at least one instruction's (M and N at least 16, K at least 16) and whose grid fits the target; else None."""
    if target.capability < (8, 0) or (c := contraction(sink)) is None:
        return None
    msize, nsize, ksize, bsize = _size(c.m), _size(c.n), _size(c.k), _size(c.batch)
    if min(msize, nsize, ksize) < 16:
        return None
    mt, nt = -(-msize // TILE_M), -(-nsize // TILE_N)
    wn = min(TC_WARPS, 1 << (nt - 1).bit_length())
    wm = min(TC_WARPS // wn, 1 << (mt - 1).bit_length())
    if bsize > target.max_grid[0] or -(-nt // wn) > target.max_grid[1] or -(-mt // wm) > target.max_grid[2]:
        return None
    return [Opt("TC", c.k[0].arg[0], TC_WARPS)]


def expand_wmma(sink: UOp) -> UOp:
    """Each WMMA as the sum it stands for, for one lane on the CPU: c_i + sum over the 16 steps of A[row, k] * B[k,
    col] in float32, A's and B's elements the sources of the lanes that hold them (`a_element`, `b_elements`) with
    the lane's id of that lane."""
    mmas = [u for u in sink.toposort() if u.op is Ops.WMMA]
    if not mmas:
        return sink
    lane = next(u for u in sink.toposort() if u.op is Ops.SPECIAL and u.arg[0] == LANE)
    g, t = lane // 4, lane % 4
    mapping = {}
    for w in mmas:
        i, a, b = w.arg, w.src[:8], w.src[8:12]
        _, col = c_element(i, g, t)
        total = w.src[12 + i]
        for k in range(TILE_K):
            # A[row, k]: row g + 8 * (i // 2) is held by the lanes of group g, its a_j with j from the row and k
            ja = k % 2 + 2 * (i // 2) + 4 * (k // 8)
            jb = k % 2 + 2 * (k // 8)
            av = a[ja].substitute({lane: g * 4 + k % 8 // 2})
            bv = b[jb].substitute({lane: col * 4 + k % 8 // 2})
            total = total + av.cast(dtypes.float32) * bv.cast(dtypes.float32)
        mapping[w] = total
    return sink.substitute(mapping)


__all__ = ["Contraction", "a_element", "b_element", "c_element", "contraction", "expand_wmma", "tensor_core",
           "tensor_core_opts"]
