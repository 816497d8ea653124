"""The benchmark harness runs end to end: `--quick` sizes, tgfx and numpy only, in this process.

It asserts that every workload gets a row and that every tgfx result was checked against numpy; it never asserts a
time (speed is what `python -m bench` reports, not what tests check).
"""
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator

import numpy as np
import pytest

from tgfx import config, diskcache

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/ is not installed with tgfx

from bench import run  # noqa: E402
from bench.workloads import QUICK, WORKLOADS  # noqa: E402


@pytest.fixture(autouse=True)
def _runners_caches_go_with_the_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The bench's runners give tgfx a new, empty compile cache for the process (a cold first call, as jax's:
    `config.CACHE_DIR.value` or `TGFX_CACHE_DIR` set to a `tempfile.mkdtemp`) and leave it set and on disk. In the
    suite every later test of the worker then ran on that cache, not the session's (tests/conftest.py), and the
    directories stayed in the temp folder (132 `tgfx-programs-*` on this host, 2.4 GB). The session's cache is put
    back after each test here, and the directories the runners made are removed (their writes recorded first: the
    disk cache's exit handler would make a directory again to record them)."""
    made: list[str] = []
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(*args: object, **kwargs: object) -> str:
        made.append(real_mkdtemp(*args, **kwargs))   # type: ignore[arg-type]
        return made[-1]
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(config.CACHE_DIR, "value", config.CACHE_DIR.value)   # (restored after the test)
    monkeypatch.setenv("TGFX_CACHE_DIR", os.environ["TGFX_CACHE_DIR"])
    yield
    for d in made:
        diskcache.record(d)   # (what this process wrote there is recorded now, not at exit into a removed folder)
        shutil.rmtree(d, ignore_errors=True)


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


# each program's loss after `python -m bench.programs --quick --steps 1` (five steps) under jax 0.10.2 on the CPU
JAX_QUICK_LOSSES = {
    "transformer": 4.0613603591918945,
    "cnn_bn": 2.4138035774230957,
    "lstm": 2.7601001262664795,
    "dpsgd": 2.410031795501709,
    "ode": 1.8062227964401245,
    "eager": 2.341975688934326,
    "eager_adam": 2.4757883548736572,
    "sampling": 56.0,
    "gnn": 0.7367837429046631,
    "kmeans": 600.71044921875,
    "decode": 304.0,
    "spectral": 0.501868724822998,
    "gat": 1.3728107213974,
    "cmaes": 5.192705154418945,
    "sinkhorn": 0.28158336877822876,
    "ddpm": 1.1505556106567383,
    "hmm": 2.075474977493286,
    "reinforce": -6.759898662567139,
    "maml": 10.601715087890625,
    "hmc": 37.896331787109375,
    "deq": 1.0101664066314697,
    "lbfgs": 0.3662024736404419,
    "ppo": 0.06440205872058868,
    "vit": 1.144686222076416,
    "realnvp": 2.6302294731140137,
    "gpt": 4.203640937805176,
    "resnet": 3.096623420715332,
    "word2vec": 4.1570329666137695,
    "moe": 4.168456554412842,
    "beam": -9.845731735229492,
    "ctc": 1.402341604232788,
    "md": -141.18182373046875,
    "filters": -2.3076581954956055,
    "fno": 1.0534839630126953,
    "heat": 0.002511003753170371,
    "unet": 1.2375502586364746,
    "nerf": 0.16224530339241028,
    "lru": 1.53519868850708,
    "lru_scan": 1.53519868850708,
    "mamba": 3.985142946243286,
    "dqn": 0.22710417211055756,
    "ising": -1.5,
    "gmm_em": 2.9430527687072754,
    "wavenet": 3.5875051021575928,
    "simclr": 2.707836627960205,
    "dp_mlp": 2.395103931427002,
    "tp_mlp": 3.6075117588043213,
    "dp_transformer": 3.9176735877990723,
    "training": 1.3646395206451416,
    "seq2seq": 2.4897382259368896,
    "sst2": 0.6863734126091003,
    "pixelcnn": 5.062555313110352,
    "hnn": 0.583938479423523,
    "graphnet": 1.0524619817733765,
    "vqvae": 0.23315899074077606,
    "eqx": 1.8957420587539673,
    "remat": 3.6211228370666504,
    "mps": 1.3075114488601685,
    "pool_scan": 0.9508463144302368,
    "odeint_adjoint": 0.4665825068950653,
    "svi": 0.6967924237251282,
    "actor_critic": 28.32975959777832,
}


def test_every_program_has_jaxs_quick_loss() -> None:
    from bench import programs
    assert sorted(JAX_QUICK_LOSSES) == sorted(programs.PROGRAMS)


PROGRAM_PARTS = 4   # the programs in parts, so that test workers share them (together a minute or more)


@pytest.mark.parametrize("part", range(PROGRAM_PARTS))
def test_the_programs_train_as_under_jax(capsys, part: int):
    """`python -m bench.programs --quick --only ...`: every program trains on tgfx to jax's loss, within the
    tolerance the bench itself holds the two to (1e-3 relative; the sampled and decoded programs' losses are token
    sums, exact)."""
    from bench import programs
    names = sorted(JAX_QUICK_LOSSES)[part::PROGRAM_PARTS]
    assert programs.main(["--quick", "--steps", "1", "--frameworks", "tgfx", "--only", ",".join(names)]) == 0
    out = capsys.readouterr().out
    for name in names:
        (row,) = [line for line in out.splitlines() if line.startswith(name + " ")]
        want = JAX_QUICK_LOSSES[name]
        assert abs(float(row.split()[5]) - want) <= max(1e-3 * abs(want), 1e-5), (row, want)


def test_eager_ops_print_a_time_each(capsys):
    """`python -m bench.eager --frameworks tgfx`: a row per op, each a time (jax's column and ratio need jax)."""
    from bench import eager
    assert eager.main(["--frameworks", "tgfx", "--repeat", "1", "--sample-ms", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    for name, _ in eager.OPS:
        (row,) = [line for line in out if line.startswith(name + " ")]
        assert float(row.split()[-1]) > 0, row


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


def test_gpu_check_ab_steps_run_where_there_is_no_gpu(capsys):
    """`python -m bench.gpu_ab` (gpu_check.sh's smem-ab and tc-ab steps) run end to end on the CPU: each flag value
    in its own process, its kernel timed and its answer checked, so the GPU machine's short lease is not spent on a
    script that fails."""
    from bench import gpu_ab
    assert gpu_ab.main(["GPU_TC", "bfloat16", "--device", "CPU", "--n", "64"]) == 0
    out = capsys.readouterr().out.splitlines()
    for value in ("1", "0"):
        (row,) = [line for line in out if f"GPU_TC={value}:" in line]
        assert float(row.split("max rel err")[1]) < 2 ** -7, row   # a bfloat16 result: within its rounding


def test_gpu_check_ab_step_reports_a_process_past_its_timeout_and_goes_on(capsys):
    """A flag value's process that runs past `--timeout` is reported as such, the other value still runs, and the
    step's exit status says one failed: a slow first compile on the GPU machine costs that one value, not the step."""
    from bench import gpu_ab
    assert gpu_ab.main(["GPU_SMEM", "float32", "--device", "CPU", "--n", "64", "--timeout", "0.05"]) == 1
    out = capsys.readouterr().out
    assert "GPU_SMEM=1 timed out after 0.05 s" in out and "GPU_SMEM=0 timed out after 0.05 s" in out, out


def test_gpu_check_steps_fit_the_lease():
    """`bench/gpu_check.sh` parses (`bash -n`), and its steps' time limits, each with the grace before its kill, sum
    under 8 minutes, as does the cap on the whole run (GPU_CHECK_TOTAL): a GPU is lent for 15 minutes in all, its
    start included, and a step that hangs must not take the steps after it (their limits summed to 21 minutes)."""
    import re
    import subprocess
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "gpu_check.sh")
    assert subprocess.run(["bash", "-n", path], capture_output=True).returncode == 0
    text = open(path).read()
    grace = int(re.search(r"--kill-after=(\d+)", text).group(1))
    limits = {m[1]: int(m[2]) for m in re.finditer(r"^\s*(?:TAIL=\d+ )?step ([\w-]+) (\d+) ", text, re.M)}
    assert {"driver", "gpu-tests", "program", "ops", "bench", "kernels", "beam", "smem-ab", "tc-ab"} <= set(limits)
    optional = {"install", "peers"}   # (only where a package is missing or asked for: the cap bounds the run then)
    assert sum(limit + grace for name, limit in limits.items() if name not in optional) <= 8 * 60, limits
    assert int(re.search(r"GPU_CHECK_TOTAL:-\$\(\( (\d+) \* SCALE", text)[1]) + grace <= 8 * 60
