"""The benchmark harness runs end to end: `--quick` sizes, tgfx and numpy only, in this process.

It asserts that every workload gets a row and that every tgfx result was checked against numpy; it never asserts a
time (speed is what `python -m bench` reports, not what tests check).
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/ is not installed with tgfx

from bench import run  # noqa: E402
from bench.workloads import QUICK, WORKLOADS  # noqa: E402


def test_quick_bench_prints_every_workload_verified(capsys):
    rows, frameworks = run.run(["--quick", "--frameworks", "tgfx,numpy", "--repeat", "1"])
    out = capsys.readouterr().out
    assert frameworks == ["tgfx", "numpy"]
    table = out[out.index("workload"):]
    for wl in WORKLOADS:
        assert wl.title(QUICK) in table, f"no row for {wl.name} in:\n{out}"
    # the first-call workload is two rows: an empty compile cache, then the cache it filled
    assert len(rows) == len(WORKLOADS) + 1
    notes = {row.title: {fw: cell.note for fw, cell in row.cells.items() if cell.status != "ok"} for row in rows}
    assert all(row.cells["tgfx"].status == "ok" for row in rows), notes
    assert all(row.cells["numpy"].status == "ok" for row in rows if "numpy" in row.cells), notes
    assert f"verified: every tgfx result matches numpy (allclose) on all {len(rows)} rows" in out
    assert "WRONG" not in out and "ERROR" not in out


def test_options_are_checked():
    with pytest.raises(SystemExit):
        run.parse_args(["--only", "nosuchworkload"])
    args = run.parse_args(["--only", "matmul,gelu", "--frameworks", "tgfx,numpy,jax"])
    assert [w.name for w in args.workloads] == ["matmul", "gelu"]
    assert args.asked == ["tgfx", "numpy", "jax"]


def test_the_programs_run_for_tgfx(capsys):
    """`python -m bench.programs --quick`: every program trains (its loss a finite number) on tgfx."""
    from bench import programs
    assert programs.main(["--quick", "--steps", "1", "--frameworks", "tgfx"]) == 0
    out = capsys.readouterr().out
    for name in programs.PROGRAMS:
        (row,) = [line for line in out.splitlines() if line.startswith(name + " ")]
        assert np.isfinite(float(row.split()[5])), row


def test_kernels_lists_each_steps_costliest_kernels(capsys):
    """`python -m bench.kernels --quick`: per workload its step's wall and kernel time, and its costliest kernels."""
    from bench import kernels
    assert kernels.main(["--quick", "--only", "mlp,conv2d", "--top", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    for name in ("mlp", "conv2d"):
        (head,) = [i for i, line in enumerate(out) if line.startswith(f"{name}: ")]
        assert "ms per step" in out[head] and "kernels: overhead" in out[head], out[head]
        listed = out[head + 1:head + 3] if name == "mlp" else out[head + 1:head + 2]
        assert listed and all(line.split()[1] == "us" and float(line.split()[0]) > 0 for line in listed), out
    with pytest.raises(SystemExit):
        kernels.main(["--only", "firstcall"])   # measured in child processes: no step here


def test_kernels_records_each_gpu_kernels_launch_by_name():
    """What `bench.kernels` prints beside a GPU kernel: the grid, block and options it was rendered with, recorded
    from the NVPTX path the CUDA device compiles through (`ptx_of`), on a machine without a GPU too."""
    import tgfx as tg
    import tgfx.lowering as lowering
    from bench.kernels import _GpuLaunches
    from tgfx.lowering import render_nvptx
    asts = []
    orig = lowering.lower_kernel

    def hook(ast, *a, **k):
        asts.append(ast)
        return orig(ast, *a, **k)
    lowering.forget_compiled()
    lowering.lower_kernel = hook
    try:
        x = tg.asarray(np.ones((64, 93), np.float32))   # (a shape no other test compiles)
        (x @ x.T).numpy()
    finally:
        lowering.lower_kernel = orig
    real = render_nvptx.kernel_ir
    with _GpuLaunches() as launches:
        _, name, dims = render_nvptx.ptx_of(asts[0])
    assert render_nvptx.kernel_ir is real
    assert launches.by_name[name].startswith(f"grid {dims.grid} block {dims.block} opts [('"), launches.by_name
