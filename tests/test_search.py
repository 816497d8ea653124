"""BEAM: the timed search over kernel options, its on-disk cache, and what it counts (never how long it took)."""
import json
import os
import pathlib
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

import tgfx as tg
from tgfx import config
from tgfx.devices.target import host_target
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering import forget_compiled, index_level, lower_kernel
from tgfx.lowering import search as beam
from tgfx.lowering.kernel_opts import Opt
from tgfx.lowering.optimize import apply_hand_coded
from tgfx.lowering.schedule import schedule

ROOT = pathlib.Path(__file__).resolve().parent.parent
_rng = np.random.default_rng(1)
A, B = _rng.standard_normal((24, 20)).astype(np.float32), _rng.standard_normal((20, 40)).astype(np.float32)
C, D = _rng.standard_normal((16, 12)).astype(np.float32), _rng.standard_normal((12, 20)).astype(np.float32)


@pytest.fixture
def cache(tmp_path):
    """An empty cache directory, BEAM=2 with a small budget, and no kernel or search result in memory."""
    forget_compiled()
    beam.clear_cache()
    with config.Context(TGFX_CACHE_DIR=str(tmp_path), BEAM=2, BEAM_BUDGET=1.5):
        tg.counters.reset()
        yield tmp_path
    forget_compiled()
    beam.clear_cache()


def on_cpu(x: np.ndarray) -> tg.Tensor:
    """`x` on the CPU, whatever the default device (`-p tests.emulated_cuda` makes it CUDA:0): this is the CPU's
    beam search (CUDA:0's is test_cuda_runtime's)."""
    return tg.asarray(x, device="CPU")


def run_matmul(a=A, b=B):
    np.testing.assert_allclose((on_cpu(a) @ on_cpu(b)).numpy(), a @ b, rtol=1e-5, atol=1e-5)


def entries(cache_dir):
    return sorted((cache_dir / "beam").rglob("*.json"))


def again():
    """Forget everything this process holds in memory, keep the disk, and count from zero."""
    forget_compiled()
    beam.clear_cache()
    tg.counters.reset()


def test_beam_searches_once_then_every_process_reads_the_cache(cache):
    run_matmul()
    c = tg.counters
    assert c.search_count == 1 and c.search_compile_count >= 2  # no options and the heuristics', at least
    assert c.compile_count == 1  # the winner, compiled to run; candidates count apart
    (entry,) = entries(cache)
    found = json.loads(entry.read_text())["opts"]
    assert all(op in beam.OPT_OPS for op, _, _ in found)

    again()
    run_matmul()
    assert (c.search_count, c.search_compile_count, c.compile_count) == (0, 0, 0)

    script = ("import numpy as np, tgfx as tg\n"
              "a, b = np.ones((24, 20), np.float32), np.ones((20, 40), np.float32)\n"
              "assert ((tg.asarray(a) @ tg.asarray(b)).numpy() == 20).all()\n"
              "c = tg.counters\n"
              "print(c.search_count, c.search_compile_count, c.compile_count)\n")
    env = {**os.environ, "TGFX_CACHE_DIR": str(cache), "BEAM": "2", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "0", "0"]


def _forge(path, opts):
    key = path.stem
    raw = [[o.op, o.axis, o.amount] for o in opts]
    path.write_text(json.dumps({"key": key, "opts": raw, "checksum": beam._checksum(key, raw)}))


@pytest.mark.parametrize("corrupt", ["garbage", "truncated", "edited", "wrong_key", "does_not_fit"])
def test_a_corrupt_cache_entry_is_searched_again(cache, corrupt):
    with config.Context(BEAM_BUDGET=0.3):
        run_matmul(C, D)
        (entry,) = entries(cache)
        text = entry.read_text()
        if corrupt == "garbage":
            entry.write_bytes(b"\x00\xff not json")
        elif corrupt == "truncated":
            entry.write_text(text[:len(text) // 2])
        elif corrupt == "edited":  # options changed by hand: the checksum no longer matches
            data = json.loads(text)
            data["opts"] = [["UPCAST", 0, 8]]
            entry.write_text(json.dumps(data))
        elif corrupt == "wrong_key":
            data = json.loads(text)
            data["key"] = "0" * 64
            entry.write_text(json.dumps(data))
        else:  # well formed and checksummed, but range 7 is not in this kernel
            _forge(entry, [Opt("UPCAST", 7, 4)])
        again()
        run_matmul(C, D)
    assert tg.counters.search_count == 1
    assert beam._read(entry.stem) is not None  # the search wrote a good entry back


def test_beam_and_heuristic_kernels_do_not_stand_in_for_each_other(cache):
    linear, _ = schedule([(on_cpu(A) @ on_cpu(B)).uop])
    ast = linear.src[0].src[0]
    searched = lower_kernel(ast)
    with config.Context(BEAM=0):
        heuristic = lower_kernel(ast)
    assert list(heuristic.opts) == apply_hand_coded(index_level(ast), host_target())[1]
    (entry,) = entries(cache)
    assert [[o.op, o.axis, o.amount] for o in searched.opts] == json.loads(entry.read_text())["opts"]
    # one program each, whether or not the options agree (where they do, the code is the same but for the symbol:
    # one compile, `lower_kernel`'s `_same_code`)
    assert searched is not heuristic
    assert tg.counters.compile_count == (1 if list(searched.opts) == list(heuristic.opts) else 2)
    # search results are kept apart by width, core count and CPU too
    t = host_target()
    keys = {beam.beam_key(ast.key, 2, t.with_cores(4)), beam.beam_key(ast.key, 3, t.with_cores(4)),
            beam.beam_key(ast.key, 2, t.with_cores(8)), beam.beam_key(ast.key, 2, replace(t, cpu="haswell"))}
    assert len(keys) == 4


def test_the_budget_bounds_the_search_and_a_progress_line_reports_it(cache, capsys):
    with config.Context(BEAM_BUDGET=0.0, DEBUG=1):
        run_matmul()
    assert tg.counters.search_count == 1
    out, err = capsys.readouterr()
    assert err.startswith("\rBEAM 2 r_24_40_") and err.endswith("\n")
    assert "r_24_40_" in out and "_beam" not in out  # DEBUG lines for the program's kernel, none for candidates
    # out of time from the start: only the two starting points (no options, the heuristics') are timed
    assert err.split("\r")[-1].split(":")[1].startswith(" 2 candidates, best ")


def test_kernels_that_address_by_loaded_data_are_not_searched(cache):
    idx = UOp(Ops.DEFINE_GLOBAL, dtypes.int32, (), (1, 8))
    x = UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), (2, 100))
    out = UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), (0, 8))
    r = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, 8),), (0, "loop"))
    i = UOp(Ops.LOAD, dtypes.int32, (UOp(Ops.INDEX, dtypes.int32, (idx, r)),)).cast(dtypes.index)
    gather = UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32, (x, i)),))
    sink = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (UOp(Ops.INDEX, dtypes.float32, (out, r)), gather)),))
    assert not beam.searchable(sink)
    assert beam.searchable(index_level(schedule([(on_cpu(A) @ on_cpu(B)).uop])[0].src[0].src[0]))
    beam.beam_search(sink, sink.key, "gather", 2, host_target().with_cores(2))
    assert tg.counters.search_count == 0 and not entries(cache)


def test_big_kernels_are_timed_on_a_slice_of_their_outer_loop(cache, monkeypatch):
    monkeypatch.setattr(beam, "TIMED_TRIPS", 24 * 40 * 20 // 8)
    sink = index_level(schedule([(on_cpu(A) @ on_cpu(B)).uop])[0].src[0].src[0])
    search = beam._Search(sink, "mm", 2, 2)
    assert search.slice == 8
    cut, scale = search.sliced(sink)
    assert beam.ranges(cut)[0].src[0].arg == 3 and scale == 8  # 24 rows -> 3, the other loops whole
    assert [r.src[0].arg for r in beam.ranges(cut).values() if r.arg[0] != 0] == \
        [r.src[0].arg for r in beam.ranges(sink).values() if r.arg[0] != 0]
    with config.Context(BEAM_BUDGET=0.3):
        run_matmul()  # the winner is compiled whole: the answer is right
    assert tg.counters.search_count == 1
