"""tg.distributed over MPI: `mpiexec -n 2` and `-n 3` (oversubscribed on a 2-core machine) run the programs of
tests/distributed_programs.py, every process the same one. Skipped, with the reason, without the `distributed`
extra (`pip install -e '.[distributed]'`: mpi4py and MPICH)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = Path(__file__).resolve().parent / "distributed_programs.py"
LAUNCH_TIMEOUT_S = 120   # a hang fails the test instead of the suite


def _mpiexec() -> str | None:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return None
    here = Path(sys.executable).parent / "mpiexec"   # the mpich wheel puts it next to the interpreter
    return str(here) if here.exists() else shutil.which("mpiexec")


MPIEXEC = _mpiexec()
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="needs the distributed extra: pip install -e "
                                                         "'.[distributed]' (mpi4py and an MPI with mpiexec)")


def launch(n: int, scenario: str, timeout_s: float = 30.0, devices: int = 1) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "TGFX_CPU_DEVICES": str(devices),
           "TGFX_WAIT_TIMEOUT": str(timeout_s), "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(PROGRAMS), scenario], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S)


def passed(out: str) -> set[tuple[str, int]]:
    # (the launcher forwards each process's output as it comes: lines of two processes may run together)
    return {(name, int(r)) for name, r in re.findall(r"ok (\w+) (\d+)", out)}


@pytest.mark.parametrize("n, devices", [(2, 2), (3, 1)])
def test_programs_across_processes(n: int, devices: int) -> None:
    """On n processes of `devices` CPU devices each (a ring within a process, MPI between them): global device
    names, global arrays from each process's data, eager reductions, all-gathers (to one device, replicated, along
    another axis, resharding), kernels submitted while the network engine runs (and its collectives in a profile), a
    jitted data-parallel grad step equal to one process's (one trace, one bucketed all-reduce a step), tg.lax in it."""
    res = launch(n, "main", devices=devices)
    assert res.returncode == 0, res.stdout + res.stderr
    checks = ("names", "eager", "gather", "overlap", "jit_grad", "lax")
    assert passed(res.stdout) == {(name, r) for name in checks for r in range(n)}, res.stdout + res.stderr


def test_mismatched_programs_are_reported_before_the_collective() -> None:
    """Process 1's all-reduce has another size: every process raises DistributedMismatchError, none hangs."""
    res = launch(2, "mismatch")
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(re.findall(r"mismatch detected (\d)", res.stdout)) == ["0", "1"], res.stdout
    assert "of 5 float32 values" in res.stdout and "of 3 float32 values" in res.stdout


def test_a_failing_process_ends_them_all() -> None:
    """Process 1 raises while process 0 waits in a collective: MPI_Abort ends both, with the error, well before the
    collective's timeout (30 s)."""
    start = time.monotonic()
    res = launch(2, "dies", timeout_s=30.0)
    assert res.returncode != 0
    assert time.monotonic() - start < 25, "the surviving process waited for its timeout instead of being aborted"
    err = res.stdout + res.stderr
    assert "process 1 fails on purpose" in err and "aborting every process" in err, err
    assert "finished a collective" not in err


def test_initialize_without_a_launcher_is_a_clear_error() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI", "OMPI", "PMIX", "SLURM", "MPI_", "HYDRA"))}
    res = subprocess.run([sys.executable, "-c", "import tgfx as tg; tg.distributed.initialize()"], env=env,
                         cwd=ROOT, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S)
    assert res.returncode != 0 and "not started by an MPI launcher" in res.stderr, res.stderr


def test_train_digits_distributed_matches_one_process() -> None:
    """The README example, data-parallel over 2 processes, reaches one process's accuracy (to the printed digit)."""
    pytest.importorskip("sklearn")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    example = str(ROOT / "examples" / "train_digits.py")
    one = subprocess.run([sys.executable, example, "--epochs", "1"], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=LAUNCH_TIMEOUT_S)
    two = subprocess.run([MPIEXEC, "-n", "2", sys.executable, example, "--epochs", "1", "--distributed"], env=env,
                         cwd=ROOT, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S)
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    final = [re.search(r"test accuracy ([0-9.]+)% after", r.stdout) for r in (one, two)]
    assert all(final) and final[0].group(1) == final[1].group(1), one.stdout + two.stdout
    assert "over 2 processes" in two.stdout and two.stdout.count("test accuracy") == 2   # one process reports
