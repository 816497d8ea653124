"""Programs that tests/test_distributed.py runs under `mpiexec -n N` (every process runs the same one).

`python tests/distributed_programs.py <scenario>`; each scenario prints `ok <name> <process>` per check it passes,
and any failure raises (which aborts every process: see `tg.distributed.initialize`).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time

import numpy as np

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.devices import network


def ok(name: str) -> None:
    print(f"ok {name} {tg.process_index()}", flush=True)


def data(n: int, rows: int = 8, cols: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)   # the same global data on every process
    return (rng.normal(size=(rows * n, cols)).astype(np.float32), rng.normal(size=(rows * n,)).astype(np.float32),
            rng.normal(size=(cols,)).astype(np.float32))


def loss(w: tg.Tensor, x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    return tnp.mean((tnp.tanh(x @ w) - y) ** 2)


def main() -> None:
    tg.distributed.initialize()
    tg.distributed.initialize()   # idempotent
    r, n = tg.process_index(), tg.process_count()
    devs = tg.devices()
    k = network.group().devices_per_process
    # names: this process's devices are plain, the others' carry their process
    assert len(devs) == n * k and tg.local_devices() == [f"CPU:{i}" for i in range(k)], devs
    assert devs[r * k:(r + 1) * k] == tg.local_devices()
    assert all(d == f"CPU:{i % k}@{i // k}" for i, d in enumerate(devs) if i // k != r), devs
    assert tg.local_devices((r + 1) % n) == devs[((r + 1) % n) * k:((r + 1) % n + 1) * k] or n == 1
    assert tg.devices()[0] == ("CPU:0" if r == 0 else "CPU:0@0") and tg.device_put(1.0, f"CPU:0@{r}").device == "CPU:0"
    try:
        tg.device_put(1.0, f"CPU:0@{n}")
        raise AssertionError("a device of a process that does not exist")
    except ValueError as e:
        assert f"names process {n}, but there are {n} process(es)" in str(e), e
    ok("names")

    X, Y, w0 = data(n)
    rows = len(X) // n
    x = tg.make_array_from_process_local_data(devs, X[r * rows:(r + 1) * rows])
    y = tg.make_array_from_process_local_data(devs, Y[r * rows:(r + 1) * rows])
    assert x.shape == X.shape and len(tg.distributed.local_parts(x)) == k
    np.testing.assert_array_equal(tg.distributed.process_allgather(x), X)
    try:   # a global array is not this process's to read whole: the error says how to read it
        x.numpy()
        raise AssertionError("read another process's part")
    except tg.distributed.DistributedError as e:
        assert "is a device of process" in str(e) and "process_allgather" in str(e), e
    # eager reductions over the sharded axis: one network all-reduce each
    np.testing.assert_allclose(float((x * 2).sum()), (X * 2).sum(), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(x.max(axis=0)), X.max(axis=0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(tnp.mean(x, axis=0)), X.mean(axis=0), rtol=1e-5, atol=1e-6)
    # a value every process has, sharded by tg.shard: each keeps its own pieces
    xs = tg.shard(tg.asarray(X), devs, axis=0)
    np.testing.assert_allclose(float(xs.sum()), X.sum(), rtol=1e-5)
    ok("eager")

    # values moved between processes by all-gathers: to one device, replicated, along another axis, resharded
    np.testing.assert_array_equal(tg.device_put(x, "CPU:0").numpy(), X)
    np.testing.assert_array_equal(np.asarray(tg.shard(x, devs, None)), X)
    np.testing.assert_array_equal(tg.device_put(tg.shard(tg.asarray(X.T.copy()), devs, axis=1), "CPU:0").numpy(), X.T)
    M = np.arange(2 * n * 2 * n, dtype=np.float32).reshape(2 * n, 2 * n)
    np.testing.assert_array_equal(tg.distributed.process_allgather(tg.shard(tg.shard(tg.asarray(M), devs, 0), devs, 1)),
                                  M)
    # a device's piece of a sum over the processes (sharded gradients): with one device per process, a reduce-scatter
    runs = {kind: sum(c.runs for c in _collectives() if c.kind == kind) for kind in ("allreduce", "reduce_scatter")}
    Ms = tg.shard(tg.asarray(M), devs, 0)
    np.testing.assert_array_equal(tg.distributed.process_allgather(tg.shard(Ms.sum(axis=0), devs, 0)), M.sum(0))
    ran = {kind: sum(c.runs for c in _collectives() if c.kind == kind) - runs[kind] for kind in runs}
    assert ran == ({"allreduce": 0, "reduce_scatter": 1} if k == 1 else {"allreduce": 1, "reduce_scatter": 0}), ran
    sort = tg.jit(lambda a: tnp.sort(a.reshape(-1)))   # needs the whole value on each process
    np.testing.assert_array_equal(np.asarray(sort(x)), np.sort(X.reshape(-1)))
    ok("gather")

    # the network engine overlaps with the local devices: a kernel that does not need the all-reduce is submitted
    # between the collective and the device's wait for it (which comes just before the first use of its result; with
    # several local devices that is at once: the result is copied to the others)
    f = tg.jit(lambda a, b: (tnp.exp(a).sum(axis=0), tnp.sin(b) * 3))
    sums, other = f(x, y)
    np.testing.assert_allclose(np.asarray(sums), np.exp(X).sum(axis=0), rtol=1e-5)
    np.testing.assert_allclose(tg.distributed.process_allgather(other), np.sin(Y) * 3, rtol=1e-5, atol=1e-6)
    segs = next(iter(f._cache.values()))[0].segments
    net = [i for i, s in enumerate(segs) if s.device.name == "NET"]
    waits = [i for i, s in enumerate(segs) if s.dep is not None and s.dep[0].name == "NET"]
    assert len(net) == 1 and len(waits) == 1, [(s.device.name, s.cb) for s in segs]
    assert k > 1 or any(segs[i].device.name != "NET" and segs[i].dep is None for i in range(net[0] + 1, waits[0])), \
        [(s.device.name, s.cb) for s in segs]
    # the network engine's collectives show in a profile, on the NET queue
    path = f"{tempfile.gettempdir()}/tgfx-distributed-{os.getpid()}.json"
    with tg.profile(path):
        float(x.sum())
    events = json.load(open(path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    assert any("mpi_allreduce" in str(ev.get("name")) for ev in events), events
    os.remove(path)
    ok("overlap")

    # a jitted data-parallel train step: the same numbers as one process, one trace, the collective replayed
    step = tg.jit(lambda w, x, y: w - 0.5 * tg.grad(loss)(w, x, y))
    w, ref = tg.shard(tg.asarray(w0), devs), tg.asarray(w0)
    ref_step = tg.jit(lambda w, x, y: w - 0.5 * tg.grad(loss)(w, x, y))
    runs0 = sum(c.runs for c in _collectives())
    for _ in range(4):
        w = step(w, x, y)
        ref = ref_step(ref, tg.asarray(X), tg.asarray(Y))
    got = tg.distributed.process_allgather(w)
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5, atol=1e-6)
    assert step.trace_count == 1, step.trace_count
    assert sum(c.runs for c in _collectives()) - runs0 == 4, "one bucketed all-reduce per step"
    ok("jit_grad")

    # tg.lax inside the step: the weights' update runs through lax.add / lax.mul on the replicated values
    upd = tg.jit(lambda w, x, y: tg.lax.add(w, tg.lax.mul(tg.grad(loss)(w, x, y), np.float32(-0.5))))
    w2 = upd(tg.shard(tg.asarray(w0), devs), x, y)
    np.testing.assert_allclose(np.asarray(w2), np.asarray(ref_step(tg.asarray(w0), tg.asarray(X), tg.asarray(Y))),
                               rtol=1e-5, atol=1e-6)
    ok("lax")

    # JAX's multi-host helpers, as a JAX user writes them
    from tgfx.experimental import multihost_utils
    from tgfx.sharding import Mesh, NamedSharding
    from tgfx.sharding import PartitionSpec as P
    mesh = Mesh(np.array(devs), ("data",))
    rows_sharding = NamedSharding(mesh, P("data"))
    xj = tg.make_array_from_process_local_data(rows_sharding, X[r * rows:(r + 1) * rows], X.shape)
    assert xj.sharding == rows_sharding and not xj.is_fully_addressable and not xj.is_fully_replicated
    np.testing.assert_array_equal(multihost_utils.process_allgather(xj), X)
    try:
        tg.make_array_from_process_local_data(rows_sharding, X[r * rows:(r + 1) * rows], (1, 5))
        raise AssertionError("a wrong global_shape")
    except ValueError as e:
        assert "global_shape=(1, 5)" in str(e), e
    shards = xj.addressable_shards   # this process's pieces only
    assert [s.device for s in shards] == tg.local_devices(), shards
    np.testing.assert_array_equal(np.concatenate([np.asarray(s.data) for s in shards]), X[r * rows:(r + 1) * rows])
    assert repr(xj) == f"Tensor(shape={X.shape}, dtype=float32, device={tuple(devs)!r})", repr(xj)
    back = tg.make_array_from_single_device_arrays(X.shape, rows_sharding, [s.data for s in shards])
    np.testing.assert_array_equal(multihost_utils.process_allgather(back), X)
    np.testing.assert_array_equal(multihost_utils.process_allgather(tg.device_put(X, rows_sharding)), X)
    # host values: stacked (or tiled) in process order; a pytree mixes them with global values
    got = multihost_utils.process_allgather({"r": np.float32(r), "x": xj, "rows": np.full((2,), r)}, tiled=True)
    np.testing.assert_array_equal(got["r"], np.arange(n, dtype=np.float32))
    np.testing.assert_array_equal(got["rows"], np.repeat(np.arange(n), 2))
    np.testing.assert_array_equal(got["x"], X)
    assert multihost_utils.process_allgather(np.ones((3, 2)) * r).shape == (n, 3, 2)
    seed = multihost_utils.broadcast_one_to_all({"seed": np.int32(7 + r)})["seed"]
    assert int(seed) == 7, seed
    last = multihost_utils.broadcast_one_to_all(np.float32(r), is_source=r == n - 1)
    assert float(last) == n - 1, last
    multihost_utils.sync_global_devices("checkpoint written")
    try:
        multihost_utils.sync_global_devices(f"step {r}")
        raise AssertionError("barriers of different names")
    except tg.distributed.DistributedMismatchError as e:
        assert str(e).startswith(f"process {r} reached sync_global_devices('step {r}'), but process "), e
        assert all(f"process {q} reached sync_global_devices('step {q}')" in str(e) for q in range(n)), e
    ok("jax_api")


def _collectives() -> list:
    from tgfx.lowering.multi_process import _collectives
    return [c for c in _collectives.values()]


def mismatch() -> None:
    """Process 1 holds wider rows than the others: its all-reduce differs in size, and every process says so."""
    tg.distributed.initialize()
    r = tg.process_index()
    x = tg.shard(tg.asarray(np.ones((2 * tg.process_count(), 3 if r != 1 else 5), np.float32)), tg.devices(), axis=0)
    try:
        x.sum(axis=0).numpy()
    except Exception as e:  # noqa: BLE001 -- the runtime's error carries the mismatch as its cause
        cause = e.__cause__ or e
        assert isinstance(cause, tg.distributed.DistributedMismatchError), repr(e)
        print(f"mismatch detected {r}: {cause}", flush=True)
        return
    raise AssertionError("the mismatched all-reduce ran")


def dies() -> None:
    """Process 1 raises before the collective that process 0 waits in: every process ends, with an error."""
    tg.distributed.initialize()
    x = tg.make_array_from_process_local_data(tg.devices(), np.ones(4, np.float32))
    if tg.process_index() == 1:
        raise RuntimeError("process 1 fails on purpose")
    time.sleep(0.2)
    float(x.sum())
    raise AssertionError("process 0 finished a collective that process 1 never joined")


def killed() -> None:
    """Process 1 is killed (SIGKILL: no Python, no MPI_Abort of its own) while process 0 waits in a collective: the
    launcher ends them all."""
    tg.distributed.initialize()
    x = tg.make_array_from_process_local_data(tg.devices(), np.ones(4, np.float32))
    if tg.process_index() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    float(x.sum())
    raise AssertionError("process 0 finished a collective that process 1 never joined")


def quits() -> None:
    """Process 1 ends normally without joining the collective process 0 waits in: its end reaches process 0's
    network engine, and they all end, saying which process ended."""
    tg.distributed.initialize()
    x = tg.make_array_from_process_local_data(tg.devices(), np.ones(4, np.float32))
    if tg.process_index() == 0:
        float(x.sum())
        raise AssertionError("process 0 finished a collective that process 1 never joined")


def quits_host() -> None:
    """Process 1 ends normally after 2 steps of 3 while process 0 builds its third batch (a collective on the host,
    which waited for ever): they all end, saying which process ended."""
    tg.distributed.initialize()
    for _ in range(3 if tg.process_index() == 0 else 2):
        float(tg.make_array_from_process_local_data(tg.devices(), np.ones(4, np.float32)).sum())
    if tg.process_index() == 0:
        raise AssertionError("process 0 built a batch that process 1 never joined")


def uneven() -> None:
    """Process 1 runs 2 steps of 3, then gathers the result, while process 0 builds its third batch: two different
    host collectives (process 1 took process 0's batch shapes for the gathered value). Both raise, naming both."""
    tg.distributed.initialize()
    r = tg.process_index()
    try:
        for _ in range(3 if r == 0 else 2):
            x = tg.make_array_from_process_local_data(tg.devices(), np.ones(4, np.float32))
        tg.distributed.process_allgather(x * 2)
    except tg.distributed.DistributedMismatchError as e:
        print(f"mismatch detected {r}: {e}", flush=True)
        return
    raise AssertionError("process 1 gathered a value from process 0's make_array_from_process_local_data")


def no_init() -> None:
    """Process 1 never calls initialize (it computes alone and ends): process 0, waiting in MPI_Init for it to join,
    gives up after its initialization_timeout, saying where it waited, and exits."""
    if int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0"))) == 1:
        assert float(tg.asarray(np.ones(3, np.float32)).sum()) == 3
        return
    tg.distributed.initialize(initialization_timeout=3)
    raise AssertionError("joined a process that never called initialize")


def batch_shapes() -> None:
    """Process 1's local batch is wider than process 0's; the host's collectives a batch takes are counted."""
    tg.distributed.initialize()
    r, g = tg.process_index(), network.group()
    agreed, gathered = g.ctl.Iallgather, g.ctl.allgather
    calls = []
    g.ctl = type("Counted", (), {"Iallgather": lambda _, *a: calls.append("I") or agreed(*a),
                                 "allgather": lambda _, *a: calls.append("a") or gathered(*a)})()
    x = tg.make_array_from_process_local_data(tg.devices(), np.ones((2, 3), np.float32))
    assert calls == ["I"] and x.shape == (2 * tg.process_count(), 3), calls
    try:
        tg.make_array_from_process_local_data(tg.devices(), np.ones((2, 3 if r == 0 else 5), np.float32))
    except tg.distributed.DistributedMismatchError as e:
        print(f"mismatch detected {r}: {e}", flush=True)
        return
    raise AssertionError("batches of different shapes were joined")


def stalls() -> None:
    """Process 1 stops (sleeps past TGFX_WAIT_TIMEOUT) without joining the collective process 0 waits in: process 0's
    network engine gives up after the timeout and aborts them all, saying why."""
    tg.distributed.initialize()
    x = tg.make_array_from_process_local_data(tg.devices(), np.ones(4, np.float32))
    if tg.process_index() == 1:
        time.sleep(20)
    float(x.sum())
    raise AssertionError("process 0 finished a collective that process 1 never joined")


if __name__ == "__main__":
    {"main": main, "mismatch": mismatch, "dies": dies, "killed": killed, "quits": quits, "quits_host": quits_host,
     "uneven": uneven, "stalls": stalls, "batch_shapes": batch_shapes,
     "no_init": no_init}[sys.argv[1]]()
