"""Flags set in a `with` block belong to the thread that set them, as JAX's: `enable_x64`, `disable_jit` and
`Context(...)` change what their own thread computes, not another thread's work running at the same time, while
`config.update` sets the value every thread sees. Work a thread hands to others (compile threads) sees its flags.
Each test forces its interleaving with barriers: one thread is inside its block while the other computes."""
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import config, counters
from tgfx.devices import get_device
from tgfx.devices.hcq import HCQExecError
from tgfx.dtypes import dtypes
from tgfx.lowering import forget_compiled
from tgfx.lowering.compile import compile_llvm

# (the thread outside `enable_x64` asks for float64 and is told it gets float32)
pytestmark = pytest.mark.filterwarnings("ignore:tgfx. float64 is not enabled:UserWarning")
WAIT = 60.0  # seconds before a stuck handshake fails the test instead of hanging it


def _side_by_side(inside: Callable[[threading.Barrier], None], outside: Callable[[threading.Barrier], None]) -> None:
    """Run `inside` and `outside` on two threads sharing a barrier of two; an exception in either is raised here."""
    barrier = threading.Barrier(2, timeout=WAIT)
    errors: list[BaseException] = []

    def run(fn: Callable[[threading.Barrier], None]) -> None:
        try:
            fn(barrier)
        except BaseException as e:   # noqa: BLE001 -- handed to the test's thread
            errors.append(e)
            barrier.abort()
    threads = [threading.Thread(target=run, args=(fn,), name=f"Thread-{fn.__name__}") for fn in (inside, outside)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert not any(t.is_alive() for t in threads), "a thread is stuck"
    if errors:
        raise errors[0]


def test_enable_x64_is_the_threads_own():
    seen = {}

    def inside(barrier: threading.Barrier) -> None:
        with tg.enable_x64():
            barrier.wait()    # the other thread computes while this one is in the block
            seen["inside"] = tnp.asarray(1.0, tnp.float64).dtype, dtypes.default_float, tnp.arange(3).dtype
            barrier.wait()

    def outside(barrier: threading.Barrier) -> None:
        barrier.wait()
        seen["outside"] = tnp.asarray(1.0, tnp.float64).dtype, dtypes.default_float, tnp.arange(3).dtype
        barrier.wait()
    _side_by_side(inside, outside)
    assert seen["inside"] == (dtypes.float64, dtypes.float64, dtypes.int64)
    assert seen["outside"] == (dtypes.float32, dtypes.float32, dtypes.int32)


def test_one_jitted_function_in_both_x64_modes_at_once():
    """Two threads call the same jitted function in turn, one inside `enable_x64()`: each gets its own mode's
    result, each mode is traced once, and both modes' signatures stay on the fast path (before, each change of mode
    cleared it, so a call that checked the mode while the other thread changed it could replay the other's trace)."""
    f = tg.jit(lambda x: x.astype(tnp.float64) * 2)
    xs = [tnp.asarray(np.float32(i)) for i in range(3)]   # float32 in both modes
    got: dict[str, list] = {"x64": [], "x32": []}

    def inside(barrier: threading.Barrier) -> None:
        with tg.enable_x64():
            for i in range(3):
                barrier.wait()
                got["x64"].append(f(xs[i]))
                barrier.wait()

    def outside(barrier: threading.Barrier) -> None:
        for i in range(3):
            barrier.wait()
            barrier.wait()
            got["x32"].append(f(xs[i]))
    _side_by_side(inside, outside)
    assert [r.dtype for r in got["x64"]] == [dtypes.float64] * 3
    assert [r.dtype for r in got["x32"]] == [dtypes.float32] * 3
    assert [float(r) for r in got["x64"]] == [float(r) for r in got["x32"]] == [0.0, 2.0, 4.0]
    assert f.trace_count == 2
    assert len(f._fast) == 2


def test_disable_jit_is_the_threads_own():
    """One thread inside `disable_jit()` runs the function's Python at each call; the other's calls of the same
    jitted function trace once and replay."""
    runs = []

    @tg.jit
    def g(x):
        runs.append(threading.current_thread().name)
        return x * 3

    def inside(barrier: threading.Barrier) -> None:
        with tg.disable_jit():
            barrier.wait()
            barrier.wait()
            for i in range(3):
                assert float(g(tnp.asarray(float(i)))) == 3.0 * i

    def outside(barrier: threading.Barrier) -> None:
        barrier.wait()
        for i in range(3):    # while the other thread is inside its block
            assert float(g(tnp.asarray(float(i)))) == 3.0 * i
        barrier.wait()
    _side_by_side(inside, outside)
    assert g.trace_count == 1
    assert len(runs) == 4   # the one trace, and the three eager calls


def test_context_flags_are_the_threads_own():
    seen = {}

    def inside(barrier: threading.Barrier) -> None:
        with config.Context(DEBUG=2, BEAM=2, NOOPT=1):
            barrier.wait()
            seen["inside"] = (config.DEBUG.value, int(config.BEAM), bool(config.NOOPT), config.DEBUG >= 1)
            barrier.wait()

    def outside(barrier: threading.Barrier) -> None:
        barrier.wait()
        seen["outside"] = (config.DEBUG.value, int(config.BEAM), bool(config.NOOPT), config.DEBUG >= 1)
        barrier.wait()
    _side_by_side(inside, outside)
    assert seen == {"inside": (2, 2, True, True), "outside": (0, 0, False, False)}


def test_update_is_seen_by_every_thread_but_an_overriding_block(monkeypatch):
    monkeypatch.setattr(config.BEAM_BUDGET, "value", config.BEAM_BUDGET.value)   # restored after the test
    seen = {}

    def inside(barrier: threading.Barrier) -> None:
        with config.Context(BEAM_BUDGET=1.0):
            barrier.wait()
            barrier.wait()    # the other thread updates the process-wide value meanwhile
            seen["inside"] = config.BEAM_BUDGET.value
        seen["after"] = config.BEAM_BUDGET.value

    def outside(barrier: threading.Barrier) -> None:
        barrier.wait()
        config.update("BEAM_BUDGET", 7.0)
        barrier.wait()
    _side_by_side(inside, outside)
    assert seen == {"inside": 1.0, "after": 7.0}
    assert config.BEAM_BUDGET.value == 7.0


def test_nested_blocks_restore_and_an_exception_restores():
    assert (config.DEBUG.value, config.BEAM.value) == (0, 0)
    with config.Context(DEBUG=1):
        with config.Context(DEBUG=2, BEAM=1):
            assert (config.DEBUG.value, config.BEAM.value) == (2, 1)
            with tg.disable_jit():
                assert (config.DEBUG.value, config.BEAM.value, bool(config.DISABLE_JIT)) == (2, 1, True)
            assert not config.DISABLE_JIT
        assert (config.DEBUG.value, config.BEAM.value) == (1, 0)
        with pytest.raises(ZeroDivisionError), tg.enable_x64():
            assert config.X64
            _ = 1 / 0
        assert not config.X64 and config.DEBUG.value == 1
    assert (config.DEBUG.value, config.BEAM.value) == (0, 0)
    assert config.overrides() == {}
    assert type(config.DEBUG) is config.Flag   # outside every block a read is a plain attribute again


def test_a_flag_made_inside_a_block_takes_overrides():
    with config.Context(DEBUG=1):
        flag = config.Flag("TGFX_TEST_MADE_INSIDE", 0)
        try:
            with config.Context(TGFX_TEST_MADE_INSIDE=5):
                assert flag.value == 5 and int(flag) == 5
            assert flag.value == 0
        finally:
            del config.Flag._all[flag.name]
    with pytest.raises(ValueError, match="unknown flag.*NOT_A_FLAG"):
        with config.Context(NOT_A_FLAG=1):
            pass


def test_carry_takes_the_threads_flags_to_a_pool():
    with ThreadPoolExecutor(1) as pool, config.Context(DEBUG=3):
        assert pool.submit(lambda: config.DEBUG.value).result() == 0
        assert pool.submit(config.carry(lambda: config.DEBUG.value)).result() == 3
    assert config.DEBUG.value == 0


def test_compiles_on_the_pool_threads_see_the_callers_debug(monkeypatch, capsys):
    """`prelower` compiles on pool threads; under `Context(DEBUG=4)` each compile prints its IR as one on the
    caller's thread does (a compile worker thread read the process-wide DEBUG: it printed nothing)."""
    monkeypatch.setattr(config.DISK_CACHE, "value", 0)   # compiled here, not read from the disk cache
    compiled, kernels = [], []

    def counted(ir: str | list[str], *args, **kwargs) -> bytes:
        compiled.append(threading.current_thread().name)
        kernels.append(1 if isinstance(ir, str) else len(ir))   # (kernels queued together are one module)
        return compile_llvm(ir, *args, **kwargs)
    monkeypatch.setattr("tgfx.lowering.compile.compile_llvm", counted)
    scale = 1.7373   # (kernels no other test compiles: this constant is in their code)
    f = tg.jit(lambda x, y: (tnp.sin(x * scale).sum(), tnp.cos(y @ y.T * scale) + 1, tnp.exp(x / scale).max()))
    x, y = tg.block_until_ready((tnp.ones((5, 7), device="CPU"), tnp.ones((3, 6), device="CPU")))   # the CPU's compiles
    compiled.clear()
    kernels.clear()
    capsys.readouterr()
    before = counters.compile_count
    with config.Context(DEBUG=4):
        out = f(x, y)
    tg.block_until_ready(out)
    printed = capsys.readouterr().out
    assert sum(kernels) >= 2 and all(name.startswith("tgfx-compile") for name in compiled)
    assert counters.compile_count - before == sum(kernels) == printed.count("\ndefine void @")   # one per kernel


def test_a_cached_function_body_is_per_x64_mode():
    """A `function(cache=True)` body traced without x64 is not replayed inside `enable_x64()` (its float64 constant
    was float32 there)."""
    fn = tg.function(lambda x: x + tnp.asarray(1.0, tnp.float64), cache=True)
    x = tnp.ones(3, tnp.float32)
    assert fn(x).dtype == dtypes.float32
    with tg.enable_x64():
        assert fn(x).dtype == dtypes.float64
    assert fn(x).dtype == dtypes.float32


def test_a_callbacks_result_types_follow_the_mode_it_was_traced_in():
    """A float64 result for a float32 declaration is accepted without x64 only (as JAX's canonical type): the mode of
    the trace decides, not that of the thread the command processor runs the callback on (the process-wide one)."""
    f = tg.jit(lambda x: tg.pure_callback(lambda v: np.float64(2.5), tg.ShapeDtypeStruct((), tnp.float32), x))
    x = tnp.ones((), tnp.float32)
    with tg.enable_x64(), config.Context(TGFX_INLINE_BYTES=0):   # (run by the device's thread, not inline here)
        with pytest.raises(HCQExecError, match="incorrect output dtype.*expected float32, actual float64"):
            f(x).block_until_ready()
    assert float(f(x)) == 2.5



FORK_IN_BLOCKS = textwrap.dedent("""
    import os
    import threading
    from tgfx import config

    inside, done = threading.Event(), threading.Event()

    def other() -> None:   # a thread of the parent inside a block as it forks: the child has no such thread
        with config.Context(BEAM=2):
            inside.set()
            done.wait()
    t = threading.Thread(target=other)
    t.start()
    inside.wait()
    with config.Context(DEBUG=1):
        pid = os.fork()
        seen = (config.DEBUG.value, config.BEAM.value)
    if pid == 0:   # the child's own block closed: its reads are plain attributes again
        os._exit(0 if seen == (1, 0) and type(config.DEBUG) is config.Flag and config.DEBUG.value == 0 else 2)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    done.set()
    t.join()
    print(code, seen, type(config.BEAM).__name__)
""")


def test_a_child_forked_inside_blocks_keeps_only_its_own():
    run = subprocess.run([sys.executable, "-c", FORK_IN_BLOCKS], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["0", "(1,", "0)", "Flag"]


def test_a_jitted_function_follows_the_flags_that_change_its_code(monkeypatch, tmp_path):
    """A flag that changes generated code (NOOPT, BEAM, TGFX_FLUSH_DENORMALS, TGFX_CPU, x64), set after a jitted
    function's first call, is that function's from the next call on, as `with Context(BEAM=2): step(...)` is meant:
    the call traces and compiles under it; back under the first flags it replays the first program (no trace, no
    compile), and a later change to the same values, by a block or process-wide, replays the second. Before, every
    call replayed the first program, compiled under the flags of the first call."""
    # (compiles counted from nothing: run after test_eager_cost, whose kernels include this one's code, it compiled 0)
    monkeypatch.setattr(config.CACHE_DIR, "value", str(tmp_path))
    forget_compiled()
    f = tg.jit(lambda x: x * 1e-30)   # 1e-10 * 1e-30 is a float32 subnormal: 0 where denormals are flushed
    x = tnp.asarray(np.full(16, 1e-10, np.float32), device="CPU")   # (the CPU's code; CUDA:0's ignores the flag)
    assert config.FLUSH_DENORMALS.value == 1
    counters.reset()
    assert np.all(f(x).numpy() == 0)
    assert (f.trace_count, counters.compile_count) == (1, 1)
    with config.Context(TGFX_FLUSH_DENORMALS=0):
        assert np.all(f(x).numpy() > 0)
    assert (f.trace_count, counters.compile_count) == (2, 2)
    assert np.all(f(x).numpy() == 0)
    assert (f.trace_count, counters.compile_count) == (2, 2)
    monkeypatch.setattr(config.FLUSH_DENORMALS, "value", 0)   # process-wide, as `update` sets it (restored after)
    assert np.all(f(x).numpy() > 0)
    with config.Context(TGFX_FLUSH_DENORMALS=0):
        f(x)
    assert (f.trace_count, counters.compile_count, len(f._fast)) == (2, 2, 2)

    g = tg.jit(lambda a: a @ a)   # (its kernel's default options block registers: NOOPT's code differs)
    a = tnp.asarray(np.ones((64, 64), np.float32))
    g(a)
    with config.Context(NOOPT=1):
        np.testing.assert_array_equal(g(a).numpy(), np.full((64, 64), 64, np.float32))
    assert (g.trace_count, counters.compile_count) == (2, 4)
    g(a)
    with config.Context(NOOPT=1):
        g(a)
    assert (g.trace_count, counters.compile_count) == (2, 4)


@pytest.mark.parametrize("inline_bytes", [-1, 0], ids=["inline", "ring"])
def test_debug_lines_are_the_launching_threads(inline_bytes: int, capsys: pytest.CaptureFixture[str]) -> None:
    """With DEBUG>=1 a kernel's timing line is printed by whichever thread drains the device's events (a wait, a
    profile read), as the thread that launched it asked, tagged with that thread's name: a thread outside DEBUG
    launches work that prints nothing, even when a thread inside DEBUG drains it; a DEBUG thread's kernels drained by
    another thread still name it. Before, the draining thread's DEBUG decided, for every thread's kernels, untagged.
    Small programs run inline on an idle device's caller (TGFX_INLINE_BYTES=-1), the others through its ring."""
    f7 = tg.jit(lambda x: x * 3.0)    # a kernel each, one a thread
    f11 = tg.jit(lambda x: x + 5.0)
    f13 = tg.jit(lambda x: x - 1.0)
    x7, x11, x13 = (tnp.asarray(np.ones(n, np.float32), device="CPU") for n in (7, 11, 13))   # CPU:0's kernels
    dev, kernel = get_device("CPU:0"), {}
    for f, x in ((f7, x7), (f11, x11), (f13, x13)):
        dev.clear_profile()
        f(x).block_until_ready()     # compiled and run once, outside DEBUG
        # its kernel's name, as the lines print it: a kernel compiled before for another size (E_2_... for an earlier
        # test's `x * 3.0`) serves this one too, under the name it got then
        (kernel[f],) = {f" {ev.name} " for ev in dev.profile_events}
    capsys.readouterr()

    def quiet(barrier: threading.Barrier) -> None:
        with config.Context(TGFX_INLINE_BYTES=inline_bytes):
            f11(x11).block_until_ready()   # no DEBUG: its wait drains nothing, the events stay for the next drain
            barrier.wait()
            barrier.wait()

    def loud(barrier: threading.Barrier) -> None:
        with config.Context(DEBUG=1, TGFX_INLINE_BYTES=inline_bytes):
            barrier.wait()
            np.testing.assert_array_equal(f7(x7).numpy(), np.full(7, 3.0, np.float32))   # drains quiet's too
            barrier.wait()
    _side_by_side(loud, quiet)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("*** ")]
    assert not any(kernel[f11] in ln for ln in lines), lines
    assert [ln.endswith("  [Thread-loud]") for ln in lines if kernel[f7] in ln] == [True], lines

    launched = threading.Event()

    def launcher(barrier: threading.Barrier) -> None:
        with config.Context(DEBUG=1, TGFX_INLINE_BYTES=inline_bytes):
            f7(x7)                        # not waited for here
            launched.set()
            barrier.wait()

    def drainer(barrier: threading.Barrier) -> None:
        with config.Context(DEBUG=1, TGFX_INLINE_BYTES=inline_bytes):
            assert launched.wait(WAIT)
            f13(x13).numpy()              # its wait drains both threads' kernels
            barrier.wait()
    _side_by_side(launcher, drainer)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("*** ")]
    assert [ln.rsplit("  ", 1)[-1] for ln in lines if kernel[f7] in ln] == ["[Thread-launcher]"], lines
    assert [ln.rsplit("  ", 1)[-1] for ln in lines if kernel[f13] in ln] == ["[Thread-drainer]"], lines
