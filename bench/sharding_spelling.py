"""The sharded programs of `bench/programs.py` (dp_mlp, tp_mlp, dp_transformer) placed in JAX's spelling -- `Mesh`,
`NamedSharding`, `tg.device_put(x, sharding)`, as `bench/frameworks.py`'s jax runs them -- against tgfx's device
tuples (`tg.shard(x, devices, axis)`): the same losses step for step, and the per-step times side by side, runs
alternated. `python -m bench.sharding_spelling [--only dp_mlp] [--quick] [--rounds 3]`."""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from typing import Any

import numpy as np

from bench.frameworks import SHARDS, Fw, tgfx_fw
from bench.programs import PROGRAMS

SHARDED = ("dp_mlp", "tp_mlp", "dp_transformer")


def named_fw() -> Fw:
    """tgfx, its `shard` spelt as JAX's frameworks.py spells it: a NamedSharding over a 1-D mesh of the devices."""
    import tgfx as tg
    from tgfx.sharding import Mesh, NamedSharding, PartitionSpec
    with tg.Context(TGFX_CPU_DEVICES=SHARDS):
        mesh = Mesh(np.array(tg.devices()), ("d",))

    def shard(x: Any, axis: int | None) -> Any:
        spec = PartitionSpec() if axis is None else PartitionSpec(*([None] * axis), "d")
        return tg.device_put(x, NamedSharding(mesh, spec))
    return dataclasses.replace(tgfx_fw(), name="tgfx-named", shard=shard)


def run(fw: Fw, name: str, steps: int, quick: bool) -> tuple[list[float], list[float]]:
    """The losses of steps 0 .. steps + 3 and the times (ms) of the steps after the first four."""
    step = PROGRAMS[name](fw, quick)
    losses, times = [], []
    for i in range(steps + 4):
        t0 = time.perf_counter()
        losses.append(fw.sync(step(i)))
        if i >= 4:
            times.append((time.perf_counter() - t0) * 1e3)
    return losses, times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(SHARDED))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3, help="alternated runs of each spelling")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    fws = [tgfx_fw(), named_fw()]
    status = 0
    for name in args.only.split(","):
        mins: dict[str, list[float]] = {fw.name: [] for fw in fws}
        meds: dict[str, list[float]] = {fw.name: [] for fw in fws}
        losses: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for fw in fws:
                ls, ts = run(fw, name, args.steps, args.quick)
                losses[fw.name] = ls
                mins[fw.name].append(min(ts))
                meds[fw.name].append(statistics.median(ts))
        same = losses["tgfx"] == losses["tgfx-named"]
        status |= not same
        cells = "  ".join(f"{k}: min {min(mins[k]):.3f} ms, median {statistics.median(meds[k]):.3f} ms"
                          for k in mins)
        print(f"{name:15s} losses {'equal' if same else 'DIFFER'} (last {losses['tgfx'][-1]:.6f})  {cells}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
