"""All-reduce between processes: tgfx's network engine against raw mpi4py on numpy buffers, in the same run.

    mpiexec -n 2 python -m bench.mpi                  # 64 MiB of float32, 2 processes
    mpiexec -n 2 python -m bench.mpi --mib 1 --repeat 21

Each process holds a 64 MiB float32 value; both sides sum it over the processes. tgfx: a jitted function of a
replicated global Tensor whose `tg.psum`-like reduction is the network engine's Iallreduce (one collective per call,
in place on the buffers' host memory), timed to `block_until_ready`. Raw: `comm.Allreduce(send, recv)` on numpy
arrays. Samples alternate between the two (so the machine's load hits both alike); the median of `--repeat` is
reported, with the ratio raw / tgfx (1.0: as fast as raw MPI). Results are checked against numpy.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=float, default=64.0, help="MiB of float32 per process")
    ap.add_argument("--repeat", type=int, default=11, help="timed calls per side")
    args = ap.parse_args()
    import tgfx as tg
    tg.distributed.initialize()
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    r, n = tg.process_index(), tg.process_count()
    count = int(args.mib * (1 << 20)) // 4
    local = np.full(count, r + 1.0, np.float32)
    expect = float(sum(range(1, n + 1)))
    devs = tg.devices()
    # one row per process (axis 0 sharded): the sum over the rows is one all-reduce of `count` values
    x = tg.make_array_from_process_local_data(devs, local.reshape(1, count))
    allreduce = tg.jit(lambda v: v.sum(axis=0))
    recv = np.empty_like(local)

    def tgfx_call() -> None:
        allreduce(x).block_until_ready()

    def raw_call() -> None:
        comm.Allreduce(local, recv, op=MPI.SUM)

    out = np.asarray(tg.distributed.local_parts(allreduce(x))[0])
    assert np.all(out == expect), "tgfx's all-reduce is wrong"
    raw_call()
    assert np.all(recv == expect), "MPI's all-reduce is wrong"
    times: dict[str, list[float]] = {"tgfx": [], "mpi4py": []}
    for _ in range(2):
        tgfx_call()
        raw_call()
    for _ in range(args.repeat):
        for name, fn in (("tgfx", tgfx_call), ("mpi4py", raw_call)):
            comm.Barrier()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: float(np.median(v)) for k, v in times.items()}
    if r == 0:
        mb = count * 4 / 1e6
        print(f"all-reduce of {count * 4 / (1 << 20):g} MiB float32 over {n} processes "
              f"({MPI.Get_library_version().splitlines()[0].strip()})")
        for k in ("mpi4py", "tgfx"):
            print(f"  {k:<7} median {med[k] * 1e3:8.2f} ms  {mb / med[k] / 1e3:6.2f} GB/s  "
                  f"(min {min(times[k]) * 1e3:.2f} ms)")
        print(f"  ratio raw / tgfx: {med['mpi4py'] / med['tgfx']:.3f}")


if __name__ == "__main__":
    main()
