"""tg.distributed over MPI: `mpiexec -n 2` and `-n 3` (oversubscribed on a 2-core machine) run the programs of
tests/distributed_programs.py, every process the same one; skipped, with the reason, without the `distributed`
extra (`pip install -e '.[distributed]'`: mpi4py and MPICH). The first tests need no MPI: names in one process, and
the cross-process lowering of a graph, as process 0 of a pretend group of 2."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tgfx as tg
from tgfx.devices import canonical_device, network
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering import lower_multi
from tgfx.lowering.inline import walk
from tgfx.tensor import Tensor

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
needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="needs the distributed extra: pip install -e "
                                                       "'.[distributed]' (mpi4py and an MPI with mpiexec)")


def test_one_process_names() -> None:
    assert (tg.process_index(), tg.process_count()) == (0, 1) and not tg.distributed.is_initialized()
    assert canonical_device("CPU:1@0") == "CPU:1" and tg.local_devices() == tg.devices()
    with pytest.raises(ValueError, match="names process 1, but there are 1 process.*mpiexec"):
        canonical_device("CPU:0@1")
    # without other processes, a global array is a sharded one
    x = tg.make_array_from_process_local_data(("CPU:0", "CPU:1"), np.arange(6.0, dtype=np.float32).reshape(3, 2),
                                              axis=1)
    assert tg.sharding(x) == (("CPU:0", "CPU:1"), 1)
    # a process's own value (every part on its devices) is stacked over the processes, as in JAX: here one
    np.testing.assert_array_equal(tg.distributed.process_allgather(x), np.arange(6.0).reshape(1, 3, 2))
    np.testing.assert_array_equal(tg.distributed.process_allgather(x, tiled=True), np.arange(6.0).reshape(3, 2))
    assert int(tg.distributed.broadcast_one_to_all(np.int32(3))) == 3
    with pytest.raises(ValueError, match="exactly one process must be the source"):
        tg.distributed.broadcast_one_to_all(np.int32(3), is_source=False)
    tg.distributed.sync_global_devices("alone")


@pytest.fixture
def two_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as process 0 of 2 (for the lowering only: nothing runs across processes without MPI)."""
    monkeypatch.setattr(network, "_group", network.ProcessGroup(0, 2, 1))


def test_cross_process_lowering(two_processes: None) -> None:
    """Process 0's graph of a sum over a tuple spanning 2 processes: its own part reduced, one NETWORK all-reduce of
    the scalar partial, the other process's part a placeholder that no node of the graph reads."""
    devs = tuple(tg.devices("cpu"))   # (processes of CPUs: the default device may be CUDA:0)
    assert devs == ("CPU:0", "CPU:0@1")
    x = tg.make_array_from_process_local_data(devs, np.ones((2, 3), np.float32))
    assert x.shape == (4, 3) and [p.device for p in x.uop.src] == list(devs)
    sink, unflatten = lower_multi(UOp(Ops.SINK, None, ((x * 2).sum(axis=0).uop,)))
    nets = [u for u in walk(sink) if u.op is Ops.NETWORK]
    assert [n.arg for n in nets] == [("allreduce", "ADD", (0, 1), (1, 3))]
    assert len(sink.src) == 1 and not any(network.is_remote(u.device) for u in walk(sink))
    out = unflatten([UOp(Ops.BUFFER, tg.dtypes.float32, (), (-7, "CPU:0", 3))])[0]
    assert out.op is Ops.MULTI and out.src[1].device == "CPU:0@1"
    # a piece of the sum per device is a reduce-scatter; a gather to one device, an all-gather
    piece = tg.shard(tg.make_array_from_process_local_data(devs, np.ones((2, 4), np.float32)).sum(axis=0), devs, 0)
    sink, _ = lower_multi(UOp(Ops.SINK, None, (piece.uop, tg.device_put(x, "CPU:0").uop)))
    assert sorted(u.arg[0] for u in walk(sink) if u.op is Ops.NETWORK) == ["allgather", "reduce_scatter"]


def test_cross_process_errors_name_the_fix(two_processes: None) -> None:
    devs = tuple(tg.devices("cpu"))
    x = tg.make_array_from_process_local_data(devs, np.ones((2, 3), np.float32))
    with pytest.raises(tg.distributed.DistributedError, match="is a device of process 1.*process_allgather"):
        x.numpy()
    with pytest.raises(tg.distributed.DistributedError, match="MPI has no bfloat16 type"):
        lower_multi(UOp(Ops.SINK, None, (x.astype(tg.dtypes.bfloat16).max().uop,)))   # (a sum is in float32)


def test_host_data_placed_over_processes(two_processes: None) -> None:
    """A value every process has (numpy), sharded or replicated over a tuple spanning processes by tg.shard,
    device_put or a NamedSharding: this process writes its own pieces, the other's are placeholders (it wrote
    the host data to every device, another process's too, and failed)."""
    devs = tuple(tg.devices("cpu"))
    mesh = tg.sharding.Mesh(np.array(devs), ("data",))
    X = np.arange(12.0).reshape(4, 3)   # (float64: placed as float32, as on one process)
    for x, axis in [(tg.shard(X, devs, 0), 0), (tg.device_put(X, devs), None),
                    (tg.device_put(X, tg.sharding.NamedSharding(mesh, tg.sharding.P("data"))), 0),
                    (tg.device_put({"w": X}, tg.sharding.NamedSharding(mesh, tg.sharding.P()))["w"], None)]:
        assert x.shape == (4, 3) and x.dtype == tg.dtypes.float32 and tg.sharding(x) == (devs, axis)
        mine, theirs = x.uop.src
        assert theirs.device == "CPU:0@1" and theirs.shape == ((2, 3) if axis == 0 else (4, 3))
        np.testing.assert_array_equal(Tensor(mine).numpy(), X[:2] if axis == 0 else X)


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


@needs_mpi
@pytest.mark.parametrize("n, devices", [(2, 2), (3, 1)])
def test_programs_across_processes(n: int, devices: int) -> None:
    """On n processes of `devices` CPU devices each (a ring within a process, MPI between them): global device
    names, global arrays from each process's data, eager reductions, all-gathers (to one device, replicated, along
    another axis, resharding), kernels submitted while the network engine runs (and its collectives in a profile), a
    jitted data-parallel grad step equal to one process's (one trace, one bucketed all-reduce a step), tg.lax in it,
    JAX's multi-host helpers (make_array_from_process_local_data with a sharding, addressable_shards,
    make_array_from_single_device_arrays, multihost_utils' process_allgather, broadcast_one_to_all and
    sync_global_devices)."""
    res = launch(n, "main", devices=devices)
    assert res.returncode == 0, res.stdout + res.stderr
    checks = ("names", "eager", "gather", "overlap", "jit_grad", "lax", "jax_api")
    assert passed(res.stdout) == {(name, r) for name in checks for r in range(n)}, res.stdout + res.stderr


@needs_mpi
def test_mismatched_programs_are_reported_before_the_collective() -> None:
    """Process 1's all-reduce has another size: every process raises DistributedMismatchError, none hangs."""
    res = launch(2, "mismatch")
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(re.findall(r"mismatch detected (\d)", res.stdout)) == ["0", "1"], res.stdout
    assert "of 5 float32 values" in res.stdout and "of 3 float32 values" in res.stdout


@needs_mpi
def test_processes_at_different_host_collectives_say_so() -> None:
    """Process 1 gathers a result while process 0 builds another batch (it ran one step more): both raise
    DistributedMismatchError naming both calls. The host's collectives were not checked: process 1's gather took
    process 0's batch shapes as its data, and process 0 raised about 'different local data' [..., None]."""
    res = launch(2, "uneven")
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(re.findall(r"mismatch detected (\d)", res.stdout)) == ["0", "1"], res.stdout
    assert "process 0 reached make_array_from_process_local_data of float32[4] for 1 device(s), but process 1 " \
        "reached process_allgather" in res.stdout, res.stdout
    assert "process 1 reached process_allgather, but process 0 reached make_array" in res.stdout, res.stdout


@needs_mpi
def test_batches_of_different_shapes_name_each() -> None:
    """Process 1's batch has 5 columns, process 0's 3: both raise before anything runs, naming both shapes, in the
    one collective a batch takes (it took two: a check, then an exchange of the shapes)."""
    res = launch(2, "batch_shapes")
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(re.findall(r"mismatch detected (\d)", res.stdout)) == ["0", "1"], res.stdout
    assert "process 0 reached make_array_from_process_local_data of float32[2, 3] for 1 device(s), but process 1 " \
        "reached make_array_from_process_local_data of float32[2, 5]" in res.stdout, res.stdout


@needs_mpi
@pytest.mark.parametrize("how", ["dies", "killed", "quits", "quits_host", "stalls"])
def test_a_failing_process_ends_them_all(how: str) -> None:
    """Process 1 raises (or is killed) while process 0 waits in a collective: MPI_Abort (or the launcher) ends both,
    with the error, well before the collective's timeout (30 s). Process 1 ending normally without joining it (in
    the network engine, or on the host, where process 0 waited for ever): its end reaches process 0, and the error
    names it. Process 1 stopping: process 0 aborts them all after its timeout (3 s here)."""
    start = time.monotonic()
    res = launch(2, how, timeout_s=3.0 if how == "stalls" else 30.0)
    assert res.returncode != 0
    assert time.monotonic() - start < 25, "the surviving process waited for its timeout instead of being aborted"
    err = res.stdout + res.stderr
    if how == "dies":
        assert "process 1 fails on purpose" in err and "aborting every process" in err, err
    if how in ("quits", "quits_host"):
        reached = "an all-reduce (ADD) of 1 float32 values" if how == "quits" else "make_array_from_process_local_data"
        assert "process 1 reached the end of its script" in err and f"process 0 reached {reached}" in err, err
        assert "aborting every process" in err, err
    if how == "stalls":
        assert "did not complete within 3 s (TGFX_WAIT_TIMEOUT)" in err and "aborting every process" in err, err
    assert "finished a collective" not in err and "never joined" not in err


@needs_mpi
def test_a_process_that_never_initializes_ends_them_all() -> None:
    """Process 1 never calls initialize: process 0 waited in MPI_Init for ever (holding the GIL: no Python thread
    could end it). Now it exits after its initialization_timeout (3 s), printing where it waited."""
    start = time.monotonic()
    res = launch(2, "no_init")
    assert res.returncode != 0 and time.monotonic() - start < 25, res.stdout + res.stderr
    assert "Timeout (0:00:03)!" in res.stderr and "in initialize" in res.stderr, res.stderr
    assert "joined a process" not in res.stdout + res.stderr


@needs_mpi
def test_initialize_without_a_launcher_is_a_clear_error() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI", "OMPI", "PMIX", "SLURM", "MPI_", "HYDRA"))}
    res = subprocess.run([sys.executable, "-c", "import tgfx as tg; tg.distributed.initialize()"], env=env,
                         cwd=ROOT, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S)
    assert res.returncode != 0 and "not started by an MPI launcher" in res.stderr, res.stderr


@needs_mpi
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
