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

TC(axis, layout) rewrites the index-level kernel: the output axes only A's operand depends on become one axis M,
those only B's depends on one axis N, the reduce's ranges one axis K (each merged axis's index the quotients and
remainders of the ranges' it stands for), the axes both depend on one batch axis. The launch (`TC_LAYOUTS[layout]`):
a warp's 32 lanes along x (the SPECIAL "lidx0"), the warps along N on grid axis y and along M on z, a block's warps
a few of each, a block a batch index on x; each warp a few mma tiles along M and N (their A fragments each serve
every B fragment). Each lane loops over K, sums `WMMA` into its four accumulators a tile, and after the loop stores
its elements of the tiles with the kernel's own epilogue (its store and whatever it computes from the sum), gated
past the edges. The fragments' elements are plain loads of the operands' expressions at the element's row and
column, 0 past an axis's end (edges are masked: no shape is refused for its size): from global memory (a small
contraction's warps of one tile), or from the block's shared tiles of both operands, `depth` steps of K at a time,
which the block's threads fill between barriers as `optimize_gpu.stage_shared` does (16-byte reads along an
operand's contiguous axis; the emulator's `_emulated_tiles` runs them), each lane's fragments then loaded by
`ldmatrix` (A's four 8 x 8 matrices of a tile in one, B's two), a LOAD tagged `LDMATRIX` that the emulator reads as
the plain loads of the elements the lane gets, at the addresses the lanes that give their rows compute
(`expand_ldmatrix`).

On the CPU (`expand_wmma`, in `optimize_gpu.thread_loops`) the op is the sum it stands for: c_i plus sixteen
products, each element of A and B read as the lane that holds it reads it (its expression with that lane's id), so
the emulated run checks the layout, the masks and the epilogue against numpy. The CPU's own kernels never see it.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.kernel_opts import KernelOptError, Opt, ranges
from tgfx.lowering.linearize import range_deps

TILE_M, TILE_N, TILE_K = 16, 8, 16   # the instruction's shape (m16n8k16)
WARP = 32
HALVES = (dtypes.float16, dtypes.bfloat16)
LANE = "lidx0"   # the SPECIAL of a lane of the warp (the renderer's tid.x)


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


def _masked(index: UOp, size: int, exact: bool) -> tuple[UOp, UOp | None]:
    """`index` of an axis of `size`: (the index, 0 past the end, and whether it is inside), or (`index`, None) where
    the tiles cover the axis `exact`ly (an index's bounds cannot tell: a fill's lanes past its row's first element)."""
    if exact:
        return index, None
    inside = index < size
    return inside.where(index, 0), inside


def _all(conds: list[UOp | None]) -> UOp | None:
    out = None
    for c in conds:
        out = c if out is None else out if c is None else out & c
    return out


class TCLayout(NamedTuple):
    """How TC spreads a contraction: warps a block along M and N, mma tiles a warp along M and N, and the reduce
    steps staged in shared memory at a time (0: each lane reads its fragments from global memory)."""
    warps_m: int
    warps_n: int
    tiles_m: int
    tiles_n: int
    depth: int

    @property
    def block(self) -> tuple[int, int]:
        """The outputs a block computes along M and N."""
        return self.warps_m * self.tiles_m * TILE_M, self.warps_n * self.tiles_n * TILE_N


# TC's amount is the number of its layout here
TC_LAYOUTS = (
    # four warps of one 16 x 8 tile each, their fragments read from global memory: small contractions
    TCLayout(2, 2, 1, 1, 0),
    # 128 x 64 outputs a block: four warps of 4 x 4 tiles (64 x 32 outputs, 64 accumulators a lane); 32 steps of
    # both operands staged in shared memory at a time, each lane's fragments read from there (a step of A's tile
    # read by 4 warps' tiles, B's by 4: a 16-byte global read serves 8 mmas' worth of fragments)
    TCLayout(2, 2, 4, 4, 32),
    # 64 x 64 outputs a block, four warps of 2 x 4 tiles: twice the blocks of layout 1, for contractions whose blocks
    # of 128 x 64 leave SMs without one (1024^3: 128 blocks for an H200's 132 SMs, 256 so)
    TCLayout(2, 2, 2, 4, 32),
)
SMEM_PAD = 8   # halves after each row of a shared tile: rows 40 halves (20 words) apart, a fragment's 8 rows on
#                different banks (32 halves apart they were 4-way conflicts)
FILL_LANES = 8  # halves a thread copies into a shared tile at once: one 16-byte read where they are contiguous


def _contiguous_k(x: UOp, k: list[UOp]) -> bool:
    """Whether operand `x` reads along the reduce's innermost range contiguously (its first load's index steps by
    one with it): its shared tile is filled along K then, else along its rows."""
    from tgfx.lowering.optimize_gpu import _affine  # (optimize_gpu imports this module)
    for u in x.toposort():
        if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and u.src[0].src[0].op is Ops.DEFINE_GLOBAL:
            aff = _affine(u.src[0].src[1])
            return aff is not None and aff.get(k[-1], 0) == 1
    return True


def tensor_core(sink: UOp, opt: Opt) -> UOp:
    """TC(axis, layout): the contraction over reduce range `axis` on tensor cores, spread as `TC_LAYOUTS[layout]`
    says (see the module's docstring). Applied alone, to a kernel without thread ids."""
    c = contraction(sink)
    if c is None or opt.axis not in (r.arg[0] for r in c.k):
        raise KernelOptError(f"{opt}: not a float16/bfloat16 contraction summed in float32 over range {opt.axis}")
    if not 0 <= opt.amount < len(TC_LAYOUTS):
        raise KernelOptError(f"{opt}: no tensor-core layout {opt.amount} (there are {len(TC_LAYOUTS)})")
    lay = TC_LAYOUTS[opt.amount]
    msize, nsize, ksize, bsize = _size(c.m), _size(c.n), _size(c.k), _size(c.batch)
    (bm, bn), depth = lay.block, lay.depth or TILE_K
    # a warp's index along M and N: the block's warps a grid axis's threads; the blocks cover the axis whole, so no
    # thread returns early (the shared tiles' barriers wait for all): the tiles past its end are masked instead
    wm = UOp(Ops.SPECIAL, dtypes.index, (), ("gidx2", -(-msize // bm) * lay.warps_m, lay.warps_m))
    wn = UOp(Ops.SPECIAL, dtypes.index, (), ("gidx1", -(-nsize // bn) * lay.warps_n, lay.warps_n))
    lane = UOp(Ops.SPECIAL, dtypes.index, (), (LANE, WARP))
    batch = _digits(c.batch, UOp(Ops.SPECIAL, dtypes.index, (), ("gidx0", bsize, 1))) if bsize > 1 else \
        {r: UOp.const(dtypes.index, 0) for r in c.batch}
    fresh = 1 + max(r.arg[0] for r in ranges(sink).values())
    kt = -(-ksize // depth)
    ki = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, depth // TILE_K),), (fresh + 1, "reduce")) \
        if depth > TILE_K else None
    # one mma's depth in all (K of 16 without shared tiles): each mma is the sum, not the only step of a loop (which
    # depends on no index of it: the mma is hoisted above the loop's accumulators, then summed into them by adds)
    ko = UOp.const(dtypes.index, 0) if kt == 1 and ki is None and not lay.depth else \
        UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, kt),), (fresh, "reduce"))
    g, t = lane // 4, lane % 4
    m_warp, n_warp = wm * (lay.tiles_m * TILE_M), wn * (lay.tiles_n * TILE_N)

    def element(x: UOp, rows: list[UOp], row: UOp, row_size: int, col: UOp) -> UOp:
        """Operand `x` at (row, reduce step col): 0 past either's end."""
        r, r_in = _masked(row, row_size, row_size % (bm if rows is c.m else bn) == 0)
        q, q_in = _masked(col, ksize, ksize % depth == 0)
        v = x.substitute({**_digits(rows, r), **_digits(c.k, q), **batch})
        inside = _all([r_in, q_in])
        return v if inside is None else inside.where(v, v.const_like(0))

    step = ko * depth + ki * TILE_K if ki is not None else ko * depth   # the mma's first reduce step
    if lay.depth:
        # each operand's tile is [row][step] where it is contiguous along K, else [step][row] (`_shared_tiles`)
        a_k, b_k = _contiguous_k(c.a, c.k), _contiguous_k(c.b, c.k)
        a_tile, b_tile, read_bar = _shared_tiles(c, lay, wm, wn, ko, element, fresh + 2, (a_k, b_k))
        sa, sb = (depth if a_k else bm) + SMEM_PAD, (depth if b_k else bn) + SMEM_PAD
        k_in = ki * TILE_K if ki is not None else UOp.const(dtypes.index, 0)
        a_row0, b_row0 = (wm % lay.warps_m) * (lay.tiles_m * TILE_M), (wn % lay.warps_n) * (lay.tiles_n * TILE_N)
        # each lane's fragments by ldmatrix: the lane gives the address of one row of one of the 8 x 8 matrices
        # (lane // 8 the matrix, lane % 8 its row); A's four: rows 0-7 and 8-15 of steps 0-7, then of steps 8-15
        # (a [step][row] tile's matrices are read transposed: their rows are steps)
        a_rows = [(a_row0 + tm * TILE_M + lane % 8 + 8 * (lane // 8 % 2)) * sa + k_in + 8 * (lane // 16) if a_k else
                  (k_in + lane % 8 + 8 * (lane // 16)) * sa + a_row0 + tm * TILE_M + 8 * (lane // 8 % 2)
                  for tm in range(lay.tiles_m)]
        # B's two: columns 0-7 by steps 0-7, then by steps 8-15
        b_rows = [(b_row0 + tn * TILE_N + lane % 8) * sb + k_in + 8 * (lane // 8 % 2) if b_k else
                  (k_in + lane % 8 + 8 * (lane // 8 % 2)) * sb + b_row0 + tn * TILE_N for tn in range(lay.tiles_n)]

        def a_at(tm: int, i: int) -> UOp:
            return _ldmatrix(a_tile, read_bar, a_rows[tm], i, 4, not a_k)

        def b_at(tn: int, i: int) -> UOp:
            return _ldmatrix(b_tile, read_bar, b_rows[tn], i, 2, not b_k)
    else:
        def a_at(tm: int, i: int) -> UOp:
            row, col = a_element(i, g, t)
            return element(c.a, c.m, m_warp + tm * TILE_M + row, msize, step + col)

        def b_at(tn: int, i: int) -> UOp:
            row, col = b_element(i, g, t)
            return element(c.b, c.n, n_warp + tn * TILE_N + col, nsize, step + row)
    zero = UOp.const(dtypes.float32, 0.0)
    store = sink.src[0]
    stores = []
    frags_b = [[b_at(tn, i) for i in range(4)] for tn in range(lay.tiles_n)]
    for tm in range(lay.tiles_m):
        frag_a = [a_at(tm, i) for i in range(8)]
        for tn in range(lay.tiles_n):
            for i in range(4):
                mma = UOp(Ops.WMMA, dtypes.float32, (*frag_a, *frags_b[tn], zero, zero, zero, zero), i)
                acc = mma if ko.op is Ops.CONST else \
                    UOp(Ops.REDUCE, dtypes.float32, (mma, ko, *([ki] if ki is not None else [])), Ops.ADD)
                row, col = c_element(i, g, t)
                m, m_in = _masked(m_warp + tm * TILE_M + row, msize, msize % bm == 0)
                n, n_in = _masked(n_warp + tn * TILE_N + col, nsize, nsize % bn == 0)
                st = store.substitute({c.red: acc, **_digits(c.m, m), **_digits(c.n, n), **batch})
                gate = _all([st.src[2] if len(st.src) == 3 else None, m_in, n_in])
                stores.append(st if gate is None else st.replace(src=(*st.src[:2], gate)))
    return sink.replace(src=tuple(stores))


# a LOAD's arg (LDMATRIX, i, matrices, transposed): element i of a lane's fragment by ldmatrix (`_ldmatrix`)
LDMATRIX = "ldmatrix"


def _ldmatrix(tile: UOp, read_bar: UOp, row: UOp, i: int, matrices: int, trans: bool) -> UOp:
    """Element i of this lane's part of `ldmatrix.sync.aligned.m8n8.x{matrices}[.trans].b16` from shared tile `tile`
    (once the fills before `read_bar` are done), where `row` is the slot of the row this lane addresses: the lane
    gets row lane // 4 of matrix i // 2, its column 2 * (lane % 4) + i % 2 (of the row lane 8 * (i // 2) + lane // 4
    addresses); transposed, column lane // 4 of its row 2 * (lane % 4) + i % 2 (`expand_ldmatrix` reads it so). A LOAD
    of that address, tagged; the renderer loads the group at once."""
    at = UOp(Ops.INDEX, tile.dtype, (UOp(Ops.AFTER, tile.dtype, (tile, read_bar)), row))
    return UOp(Ops.LOAD, tile.dtype, (at,), (LDMATRIX, i, matrices, trans))


def expand_ldmatrix(sink: UOp) -> UOp:
    """Each ldmatrix element (`_ldmatrix`) as the plain load of the tile's element it gets: the address the lane that
    gives its row computes (its row slot with that lane's id), plus its column."""
    loads = [u for u in sink.toposort() if u.op is Ops.LOAD and isinstance(u.arg, tuple) and u.arg[0] == LDMATRIX]
    if not loads:
        return sink
    lane = next(u for u in sink.toposort() if u.op is Ops.SPECIAL and u.arg[0] == LANE)
    mapping = {}
    for u in loads:
        (_, i, _, trans), (tile, row) = u.arg, u.src[0].src
        if trans:
            slot = row.substitute({lane: 8 * (i // 2) + (lane % 4) * 2 + i % 2}) + lane // 4
        else:
            slot = row.substitute({lane: 8 * (i // 2) + lane // 4}) + (lane % 4) * 2 + i % 2
        mapping[u] = UOp(Ops.LOAD, u.dtype, (UOp(Ops.INDEX, u.dtype, (tile, slot)),))
    return sink.substitute(mapping)


def _shared_tiles(c: Contraction, lay: TCLayout, wm: UOp, wn: UOp, ko: UOp, element: Any, fresh: int,
                  along_k: tuple[bool, bool]) -> tuple[UOp, UOp, UOp]:
    """The block's shared tiles of `lay.depth` reduce steps of A (its rows, along M) and B (its columns, along N),
    filled each step of `ko` by all the block's threads between barriers, as `optimize_gpu.stage_shared` fills its
    tiles (so the emulator's `_emulated_tiles` runs them): (A's tile, B's, the barrier after the fills). A tile is
    [row][step] for an operand contiguous along K (`along_k`), else [step][row], `SMEM_PAD` more a row; each thread
    copies `FILL_LANES` adjacent elements at a time along the operand's contiguous axis, 16 bytes into shared memory
    as they came."""
    from tgfx.lowering.optimize_gpu import TIDX  # (optimize_gpu imports this module)
    depth = lay.depth
    block = WARP * lay.warps_m * lay.warps_n
    tid = UOp(Ops.SPECIAL, dtypes.index, (), (TIDX, block))
    write_bar = UOp(Ops.BARRIER, None, (ko,))
    (bm, bn), fills, tiles = lay.block, [], []
    # the block's first row of each operand: its first warp's (a fill reads the thread ids through it alone)
    origins = ((wm // lay.warps_m) * bm, (wn // lay.warps_n) * bn)
    for n_tile, (x, rows, size, count, origin) in enumerate(((c.a, c.m, _size(c.m), bm, origins[0]),
                                                             (c.b, c.n, _size(c.n), bn, origins[1]))):
        k_major = along_k[n_tile]
        stride = (depth if k_major else count) + SMEM_PAD
        local = UOp(Ops.DEFINE_LOCAL, x.dtype, (), (n_tile, (count if k_major else depth) * stride))
        total = count * depth
        f = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, -(-total // (block * FILL_LANES))),),
                (fresh + n_tile, "reduce"))
        e = (f * block + tid) * FILL_LANES   # the thread's first element this step of the fill; its lanes follow
        row0, col0 = (e // depth, e % depth) if k_major else (e % count, e // count)
        gate = (e < total,) if total % (block * FILL_LANES) else ()
        values, stores = [], []
        for lane in range(FILL_LANES):
            row, col = (row0, col0 + lane if lane else col0) if k_major else (row0 + lane if lane else row0, col0)
            v = element(x, rows, origin + row, size, ko * depth + col)
            values.append(v)
            slot = row * stride + col if k_major else col * stride + row
            stores.append(UOp(Ops.STORE, None, (UOp(Ops.INDEX, x.dtype, (UOp(Ops.AFTER, x.dtype, (local, write_bar)),
                                                                         slot)), v, *gate)))
        # (every lane's read before the stores: LLVM joins adjacent reads only where no store may come between)
        fills.append(UOp(Ops.REDUCE, x.dtype, (UOp(Ops.AFTER, x.dtype, (*values, *stores)), f), Ops.ADD))
        tiles.append(local)
    return tiles[0], tiles[1], UOp(Ops.BARRIER, None, tuple(fills))


def tensor_core_opts(sink: UOp, target: Any) -> list[Opt] | None:
    """TC for a half-precision contraction on a GPU with `mma.sync` m16n8k16 (sm_80 and newer) at least one
    instruction's tile along M, N and K (16 each), else None: in blocks of 128 x 64 outputs staged through shared
    memory where those leave no SM without one, else of 64 x 64 where those do not, else in warps of one tile each."""
    if target.capability < (8, 0) or (c := contraction(sink)) is None:
        return None
    msize, nsize, ksize, bsize = _size(c.m), _size(c.n), _size(c.k), _size(c.batch)
    if min(msize, nsize, ksize) < 16:
        return None
    for n in (1, 2, 0):
        (bm, bn), lay = TC_LAYOUTS[n].block, TC_LAYOUTS[n]
        blocks = -(-msize // bm) * -(-nsize // bn)
        if n and (blocks * bsize < target.sms or ksize < lay.depth):
            continue
        if bsize <= target.max_grid[0] and -(-nsize // bn) <= target.max_grid[1] and \
                -(-msize // bm) <= target.max_grid[2]:
            return [Opt("TC", c.k[0].arg[0], n)]
    return None


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


__all__ = ["LDMATRIX", "Contraction", "a_element", "b_element", "c_element", "contraction", "expand_ldmatrix",
           "expand_wmma", "tensor_core", "tensor_core_opts"]
