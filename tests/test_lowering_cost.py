"""What lowering a kernel costs in Python and in LLVM, by counts: rule calls of the rewrites, compiles, cache hits. And
that what saves the work leaves the kernels as they were: the same LLVM IR for the same graph. No timing here."""
import importlib
import json
import os
import subprocess
import sys

from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import PatternMatcher, UPat, graph_rewrite
from tgfx.ir.uop import UOp

idx = dtypes.index


def c(v: int) -> UOp:
    return UOp.const(idx, v)


def rng(n: int, i: int = 0) -> UOp:
    return UOp(Ops.RANGE, idx, (c(n),), (i, "loop"))


def counting_fold(pure: bool) -> tuple[PatternMatcher, list[UOp]]:
    """A matcher folding `x * 1` to x, that records each node its rule is asked about."""
    asked: list[UOp] = []

    def fold(x: UOp, k: UOp) -> UOp | None:
        asked.append(x)
        return x.src[0] if k.arg == 1 else None
    return PatternMatcher([(UPat(Ops.MUL, src=(UPat.var(), UPat.cvar("k")), name="x"), fold)], pure=pure), asked


def test_a_pure_matcher_rewrites_each_node_once_across_passes():
    """The lowering simplifies a kernel's index arithmetic after every stage, most of the graph unchanged: a pure
    matcher's rewrite of a node is kept on it, so a later pass over a graph holding it asks no rule about it again."""
    pm, asked = counting_fold(pure=True)
    a, b = rng(4, 0) * 1, rng(8, 1) * 3
    g = a + b
    assert graph_rewrite(g, pm) is rng(4, 0) + b
    assert set(asked) == {a, b}   # each MUL once (the ADD is no rule's op)
    asked.clear()
    assert graph_rewrite(g, pm) is rng(4, 0) + b
    assert asked == []
    # a new graph sharing nodes: only its new MUL is asked about
    new = rng(2, 2) * 5
    assert graph_rewrite(g * 2 + new, pm) is (rng(4, 0) + b) * 2 + new
    assert set(asked) == {new, (rng(4, 0) + b) * 2}
    # a rewrite's result is its own rewrite
    asked.clear()
    assert graph_rewrite(rng(4, 0) + b, pm) is rng(4, 0) + b
    assert asked == []


def test_a_matcher_not_pure_or_with_a_ctx_rewrites_every_pass():
    """Rules that read a ctx, or a matcher not declared pure, may answer otherwise in another pass: nothing is kept."""
    pm, asked = counting_fold(pure=False)
    g = rng(4, 0) * 1 + rng(8, 1) * 3
    graph_rewrite(g, pm)
    graph_rewrite(g, pm)
    assert len(asked) == 4
    pure, asked = counting_fold(pure=True)
    graph_rewrite(g, pure, ctx=object())
    graph_rewrite(g, pure, ctx=object())
    assert len(asked) == 4
    # two matchers keep their rewrites apart; a sum of pure matchers is pure
    other, asked_other = counting_fold(pure=True)
    graph_rewrite(g, other)
    assert len(asked_other) == 2
    assert (pure + other).pure and not (pure + pm).pure


# kernels of a few programs, lowered in one order in one process and in the other order in another: the IR of each
# kernel must not depend on what was lowered before it in the process (memoised rewrites, caches on nodes)
_PROGRAMS = r"""
import json, sys
import numpy as np
import tgfx, tgfx.numpy as tnp
import tgfx.lowering as L
irs = {}
source = L.kernel_source
def record(ast, target, opts=None):
    s = source(ast, target, opts)
    irs[ast.key] = s.ir
    return s
L.kernel_source = record
rs = np.random.default_rng(0)
x, w = tnp.asarray(rs.standard_normal((16, 32), np.float32)), tnp.asarray(rs.standard_normal((32, 24), np.float32))
img = tnp.asarray(rs.standard_normal((2, 3, 10, 10), np.float32))
ker = tnp.asarray(rs.standard_normal((4, 3, 3, 3), np.float32))
programs = [
    lambda: tgfx.jit(tgfx.grad(lambda w: tgfx.nn.softmax(x @ w, axis=-1)[:, 0].sum()))(w),
    lambda: tgfx.jit(lambda a: tnp.fft.irfft(tnp.fft.rfft(a, axis=1), axis=1))(x),
    lambda: tgfx.jit(lambda i, k: tgfx.lax.conv(i, k, (1, 1), "SAME").max(axis=(2, 3)))(img, ker),
    lambda: tgfx.jit(lambda a: tnp.concatenate([tnp.pad(a, ((1, 1), (0, 0))), a[::-1, 1:33:2].repeat(2, axis=1)],
                                               axis=0).T * 2)(x),
]
for p in (programs if sys.argv[1] == "forward" else programs[::-1]):
    p().block_until_ready()
print(json.dumps(irs))
"""


def _lowered_irs(order: str) -> dict[str, str]:
    env = {**os.environ, "TGFX_DISK_CACHE": "0"}
    out = subprocess.run([sys.executable, "-c", _PROGRAMS, order], capture_output=True, text=True, env=env,
                         timeout=600, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def test_a_kernels_ir_does_not_depend_on_what_the_process_lowered_before():
    forward, backward = _lowered_irs("forward"), _lowered_irs("backward")
    assert len(forward) >= 8 and forward.keys() == backward.keys()
    assert [k for k in forward if forward[k] != backward[k]] == []


def test_kernels_that_lower_to_the_same_code_share_one_compile(tmp_path):
    """Two kernel graphs that read a complex buffer's real parts, one as a slice of a reshape, the other as a reshape
    of a slice (spectral's FFT stages), lower to the same LLVM IR but for their names: one compile, and both run the
    right numbers. A new process reads the second from the disk cache, under the first one's symbol."""
    import numpy as np

    import tgfx
    import tgfx.numpy as tnp
    from tgfx.config import Context
    from tgfx.lowering import forget_compiled
    x = np.random.default_rng(0).standard_normal(64 * 33 * 2).astype(np.float32)
    c = float(np.random.default_rng().integers(1, 1 << 20))   # a new constant: new kernels, compiled now
    want = x.reshape(64, 33, 2)[:, :, 0] * np.float32(c)
    first = tgfx.jit(lambda a: a.reshape(2112, 2)[:, 0].reshape(64, 33) * c)
    second = tgfx.jit(lambda a: a.reshape(64, 33, 2)[:, :, 0] * c)
    with Context(TGFX_CACHE_DIR=str(tmp_path)):
        tgfx.counters.reset()
        np.testing.assert_array_equal(first(tnp.asarray(x)).numpy(), want)
        assert tgfx.counters.compile_count == 1
        np.testing.assert_array_equal(second(tnp.asarray(x)).numpy(), want)
        assert tgfx.counters.compile_count == 1 and tgfx.counters.kernel_count == 2
        # what a new process holds: nothing compiled, the disk cache; the second kernel's entry alone is enough, and
        # the first's beside it (two objects of one symbol in one code owner: each kernel finds its own)
        forget_compiled()
        np.testing.assert_array_equal(tgfx.jit(lambda a: a.reshape(64, 33, 2)[:, :, 0] * c)(tnp.asarray(x)).numpy(),
                                      want)
        np.testing.assert_array_equal(tgfx.jit(lambda a: a.reshape(2112, 2)[:, 0].reshape(64, 33) * c)(
            tnp.asarray(x)).numpy(), want)
        assert tgfx.counters.compile_count == 1


def test_kernels_that_differ_only_in_loop_axes_and_operand_order_share_one_compile(tmp_path):
    """Two transposes of one 64 x 64 buffer, the output viewed as (1, 32, 2, 64) in one and as (64, 32, 2) in the other
    (spectral's), differ only in their loops' axes and in the order of an index sum's terms: they render to the same
    IR (loops named by their order, commutative integer operands in one order), compiled once, and both are right."""
    import numpy as np

    import tgfx
    import tgfx.numpy as tnp
    from tgfx.config import Context
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    c = float(np.random.default_rng().integers(1, 1 << 20))   # a new constant: new kernels, compiled now
    first = tgfx.jit(lambda a: a.reshape(1, 64, 32, 2).transpose(0, 2, 3, 1) * c)
    second = tgfx.jit(lambda a: a.reshape(1, 32, 2, 64).transpose(0, 3, 1, 2).reshape(64, 32, 2) * c)
    with Context(TGFX_CACHE_DIR=str(tmp_path)):
        tgfx.counters.reset()
        np.testing.assert_array_equal(first(tnp.asarray(x)).numpy().reshape(64, 64), x.T * np.float32(c))
        np.testing.assert_array_equal(second(tnp.asarray(x)).numpy().reshape(64, 64), x.T * np.float32(c))
        assert tgfx.counters.compile_count == 1 and tgfx.counters.kernel_count == 2


def test_kernels_that_differ_only_in_their_length_share_one_compile(tmp_path):
    """An elementwise kernel of one loop on one core reads its trip count from its launch's values: the same update
    of parameters of 100, 1,000 and 3,000 elements (a U-Net's Adam updates, one per parameter) is one code, compiled
    once, each launch right; a new process reads each one's count from the disk cache."""
    import numpy as np

    import tgfx
    import tgfx.numpy as tnp
    from tgfx.config import Context
    from tgfx.lowering import forget_compiled
    c = float(np.random.default_rng().integers(1, 1 << 20))   # a new constant: new kernels, compiled now
    update = tgfx.jit(lambda p, g: p - c * g / (tnp.sqrt(g * g) + 1))
    sizes = (100, 1000, 3000)
    xs = [np.random.default_rng(n).standard_normal((2, n)).astype(np.float32) for n in sizes]

    def run() -> None:
        for x in xs:
            got = update(tnp.asarray(x[0]), tnp.asarray(x[1])).numpy()
            np.testing.assert_allclose(got, x[0] - np.float32(c) * x[1] / (np.sqrt(x[1] * x[1]) + 1), rtol=1e-6)
    with Context(TGFX_CACHE_DIR=str(tmp_path)):
        tgfx.counters.reset()
        run()
        assert tgfx.counters.compile_count == 1 and tgfx.counters.kernel_count == 3
        forget_compiled()
        run()
        assert tgfx.counters.compile_count == 1


def test_threaded_kernels_that_differ_only_in_their_length_share_one_compile():
    """A kernel of one loop split over cores, each core's share starting at `core * share`, reads its share from its
    launch's values too: the update of a 784 x 1024 and a 1024 x 1024 weight (the data-parallel MLP's, each split
    over the cores) is one code, compiled once, each launch right."""
    import numpy as np

    import tgfx
    import tgfx.numpy as tnp
    from tgfx import lowering
    from tgfx.config import Context
    from tgfx.lowering import forget_compiled
    c = float(np.random.default_rng().integers(1, 1 << 20))   # a new constant: new kernels, compiled now
    step = tgfx.jit(lambda p, g: p - c * g)
    with Context(TGFX_DISK_CACHE=0):
        forget_compiled()
        tgfx.counters.reset()
        for rows in (784, 1024):
            p, g = np.random.default_rng(rows).standard_normal((2, rows, 1024)).astype(np.float32)
            cpu = (tnp.asarray(p, device="CPU"), tnp.asarray(g, device="CPU"))   # the CPU's threads and compiles
            np.testing.assert_array_equal(step(*cpu).numpy(), p - np.float32(c) * g)
        assert tgfx.counters.compile_count == 1 and tgfx.counters.kernel_count == 2
    threaded = list(lowering._kernels.values())
    assert len(threaded) == 2 and all(k.global_size > 1 and "load i64, ptr %vals" in k.src for k in threaded)
    assert sorted(k.vals[0] * k.global_size for k in threaded) == [784 * 1024, 1024 * 1024]


def test_a_core_id_used_other_than_as_the_start_of_its_share_keeps_the_count_written_in():
    """`runtime_trips` of a threaded loop: only a core id whose every use is `core * trips` (the start of its share)
    lets the count be read at run time; a core id scaled by anything else (a stride of the output) is a number of
    the code, and a second core id (a second split) too."""
    from tgfx.lowering import runtime_trips
    r, core = rng(64), UOp(Ops.SPECIAL, idx, (), ("core", 8))
    start = UOp(Ops.MUL, idx, (core, c(64)))
    assert runtime_trips([core, r, start, UOp(Ops.ADD, idx, (start, r))]) is r
    assert runtime_trips([core, r, start, UOp(Ops.MUL, idx, (core, c(128)))]) is None
    assert runtime_trips([core, r, UOp(Ops.MUL, idx, (core, c(32)))]) is None
    other = UOp(Ops.SPECIAL, idx, (), ("core", 4))
    assert runtime_trips([core, other, r, start, UOp(Ops.MUL, idx, (other, c(64)))]) is None


def test_a_chain_of_one_source_ops_shares_its_range_set():
    """`range_deps` of a node whose sources depend on one set of ranges is that set, not a copy per node (the
    linearizer and renderer ask for it of every node; a chain of n unary ops held n copies); sources on different
    ranges are united."""
    from tgfx.lowering.linearize import range_deps
    r0, r1 = rng(4, 0), rng(8, 1)
    x = (r0 * 2 + r1).cast(dtypes.float32)
    chain = UOp(Ops.EXP2, dtypes.float32, (UOp(Ops.NEG, dtypes.float32, (x,)),))
    assert range_deps(chain) == {r0, r1}
    assert range_deps(chain) is range_deps(x) is range_deps(r0 * 2 + r1)
    assert range_deps(r0 * 2 + r1) == {r0, r1} and range_deps(r0 + r0 * 3) is range_deps(r0)
    assert range_deps(c(3)) == frozenset() and range_deps(r0 * 2) is range_deps(r0)


def test_a_graphs_walk_is_kept_on_its_roots(monkeypatch):
    """`inline.walk` of a SINK or a TUPLE (tracing, inlining and scheduling walk the same roots again) visits its
    nodes once; each caller gets its own list. Other nodes are walked anew (a chain would keep an order per node)."""
    import importlib
    inline = importlib.import_module("tgfx.lowering.inline")   # (the package's `inline` is a function of that name)
    visits: list[UOp] = []
    monkeypatch.setattr(inline, "outside_bodies", lambda u: visits.append(u) or u.src)
    body = rng(4, 0) * 3 + rng(8, 1)
    sink = UOp(Ops.SINK, None, (body, rng(2, 2)))
    first = inline.walk(sink)
    assert first == sink.toposort() and len(visits) == len(first)
    second = inline.walk(sink)
    assert second == first and second is not first and len(visits) == len(first)
    second.clear()
    assert inline.walk(sink) == first
    inline.walk(body)
    inline.walk(body)
    assert len(visits) == len(first) + 2 * len(body.toposort())


def test_a_costly_value_of_rolls_along_two_axes_is_split_along_one():
    """Rolls along both axes of a board split its store into a grid of pieces (3 x 3), each a copy of the value's
    code: right for a stencil's few adds, not for a value of a random hash and an exp per site (an Ising model's
    Metropolis half-sweep: 122 KB of LLVM IR a kernel, 500 ms of LLVM for two). A value of COSTLY_PIECE_OPS or more
    above its PADs is split along its innermost padded axis only: 3 pieces (49 KB, 233 ms; the step as fast)."""
    from tgfx.lowering.rangeify import COSTLY_PIECE_OPS, rangeify
    n = 16

    def roll(u: UOp, shift: int, axis: int) -> UOp:
        keep = lambda lo, hi: tuple((lo, hi) if a == axis else (0, s) for a, s in enumerate(u.shape))  # noqa: E731
        pad = lambda lo, hi: tuple((lo, hi) if a == axis else (0, 0) for a in range(len(u.shape)))  # noqa: E731
        head = UOp(Ops.SHRINK, u.dtype, (u,), keep(0, n - shift))
        tail = UOp(Ops.SHRINK, u.dtype, (u,), keep(n - shift, n))
        return UOp(Ops.PAD, u.dtype, (head,), pad(shift, 0)) + UOp(Ops.PAD, u.dtype, (tail,), pad(0, n - shift))

    def full(v: float) -> UOp:
        one = UOp(Ops.RESHAPE, dtypes.float32, (UOp.const(dtypes.float32, v),), (1, 1))
        return UOp(Ops.EXPAND, dtypes.float32, (one,), (n, n))

    def stores(ops: int) -> int:
        x = UOp(Ops.RESHAPE, dtypes.float32, (UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), (1, n * n)),), (n, n))
        val = roll(x, 1, 0) + roll(x, n - 1, 0) + roll(x, 1, 1) + roll(x, n - 1, 1)
        for _ in range(ops // 2):   # what each piece would compute again: a chain of multiply-adds on the sum
            val = val * full(1.5) + full(0.25)
        out = UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), (0, n * n))
        return len(rangeify(UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (out, val)),)), grid_numel=n * n).src)
    assert stores(0) == 9                   # the stencil: a 3 x 3 grid of boxes
    assert stores(COSTLY_PIECE_OPS) == 3    # costly: 3 pieces along the columns


def test_a_bodys_template_walks_its_shared_nodes_once_not_once_per_result(monkeypatch):
    """`template_of` binds a body's PARAMs by substituting the whole body at once: its results' shared nodes are
    walked once, not once per result (a GMM's EM loop body, 15 templates: 8% of its first call). A body of eight
    results over one chain of 200 ops visits fewer than one chain's length more nodes than a body of one."""
    import importlib
    inline = importlib.import_module("tgfx.lowering.inline")
    from tgfx.lowering.schedule import template_of
    visits: list[UOp] = []
    monkeypatch.setattr(inline, "outside_bodies", lambda u: visits.append(u) or u.src)

    def body(results: int, n: int) -> UOp:
        x, y = (UOp(Ops.PARAM, dtypes.float32, (), (k, (n,), "CPU")) for k in range(2))
        for _ in range(100):
            x = x * y + y
        outs = []
        for _ in range(results):
            outs.append(x + y)
            y = y * y
        return UOp(Ops.TUPLE, None, tuple(outs))

    counts = []
    for results, n in ((1, 16), (8, 17)):
        visits.clear()
        template_of(body(results, n))
        counts.append(len(visits))
    assert counts[1] - counts[0] < 200, counts


def test_a_body_whose_template_is_made_already_is_not_substituted_again(monkeypatch):
    """A loop's body is scheduled for each of the two steps of its round trip (`control.schedule_loop`), the second
    finding the first's template: it needs no graph, so its PARAMs are not substituted again (spectral's first call:
    3 -> 1 substitutions of its RK2 body, gmm_em's 15 -> 3). A body not seen before is substituted once."""
    schedule = importlib.import_module("tgfx.lowering.schedule")
    calls: list[UOp] = []
    real = schedule.substitute_outside_calls
    monkeypatch.setattr(schedule, "substitute_outside_calls", lambda root, *a, **k: calls.append(root) or
                        real(root, *a, **k))
    x, y = (UOp(Ops.PARAM, dtypes.float32, (), (k, (13,), "CPU")) for k in range(2))
    body = UOp(Ops.TUPLE, None, (x * y + y, y * y))
    first = schedule.template_of(body, repeated=True)
    assert calls == [body]
    assert schedule.template_of(body, repeated=True) is first and calls == [body]


def test_lowering_builds_each_index_constant_once(tmp_path, monkeypatch):
    """`UOp.const` keeps the index constants asked for last (`uop._index_const`): rangeify's strides and offsets and
    symbolic's folds ask for the same ones over and over (gmm_em's first call: 32,180 times), each time a cast and a
    lookup in the hash-consing table (1.7 us; 0.2 from the cache: gmm_em's main thread 451-465 -> 403-427 ms of CPU).
    A program's lowering builds each distinct index constant once, and the kernels are right."""
    import numpy as np

    import tgfx
    import tgfx.numpy as tnp
    from tgfx.config import Context
    from tgfx.ir import uop as uop_mod
    built: list[int] = []
    real = uop_mod.UOpMeta.__call__

    def counted(cls, op, dtype=None, src=(), arg=None, tag=None):   # noqa: ANN001, ANN202
        if op is Ops.CONST and dtype is idx:
            built.append(arg)
        return real(cls, op, dtype, src, arg, tag)
    x = np.random.default_rng(1).standard_normal((6, 10, 12)).astype(np.float32)
    k = float(np.random.default_rng().integers(1, 1 << 20))   # a new constant: new kernels, lowered now
    f = tgfx.jit(lambda a: (a.transpose(2, 0, 1).reshape(12, 60) * k).sum(axis=1) + a[:, ::2, 1:].max())
    uop_mod._index_const.cache_clear()
    monkeypatch.setattr(uop_mod.UOpMeta, "__call__", counted)
    with Context(TGFX_CACHE_DIR=str(tmp_path)):
        got = f(tnp.asarray(x)).numpy()
    monkeypatch.undo()
    want = (x.transpose(2, 0, 1).reshape(12, 60) * np.float32(k)).sum(axis=1) + x[:, ::2, 1:].max()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert len(built) >= 10 and len(built) == len(set(built))


def test_kernels_of_one_index_level_code_are_lowered_through_the_options_once(monkeypatch):
    """An Adam update of a (128,) bias and of a (128, 1) weight (fno's) are two kernel graphs, their buffers viewed in
    two shapes, with one index-level code: the options, the linearizer and the renderer run for the first only, and
    the second's source is the first's under its own name, as its own lowering gives it."""
    import dataclasses

    import tgfx.lowering as L
    from tgfx.devices.target import host_target
    f32 = dtypes.float32

    def update(shape: tuple[int, ...]) -> UOp:
        def buf(slot: int) -> UOp:
            return UOp(Ops.RESHAPE, f32, (UOp(Ops.DEFINE_GLOBAL, f32, (), (slot, 128)),), shape)

        def full(v: float) -> UOp:
            one = UOp(Ops.RESHAPE, f32, (UOp.const(f32, v),), (1,) * len(shape))
            return UOp(Ops.EXPAND, f32, (one,), shape)
        step = full(0.5) * buf(2) * UOp(Ops.RECIP, f32, (UOp(Ops.SQRT, f32, (buf(3),)) + full(1e-8),))
        val = buf(1) + UOp(Ops.NEG, f32, (step,))
        return UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (UOp(Ops.DEFINE_GLOBAL, f32, (), (0, 128)), val)),))
    bias, weight = update((128,)), update((128, 1))
    assert bias.key != weight.key
    optimized: list[UOp] = []
    optimize = L.optimize
    monkeypatch.setattr(L, "optimize", lambda sink, *a, **k: optimized.append(sink) or optimize(sink, *a, **k))
    target = host_target()
    with L.gc_paused():   # (as a program's kernels are lowered: its rewritten graphs kept until the last)
        first, second = L.kernel_source(bias, target), L.kernel_source(weight, target)
        assert len(optimized) == 1 and first.name != second.name
        assert second.ir == first.ir.replace(first.name, second.name)
        # what lowering the second alone gives: its index-level code's kept source dropped, lowered again
        optimized[0].__dict__.pop(L._LOWERED)
        alone = L.kernel_source(weight, target)
    assert len(optimized) == 2 and alone == second
    assert dataclasses.replace(second, name=first.name, ir=first.ir) == first
