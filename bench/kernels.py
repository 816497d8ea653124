"""Where a tgfx workload's step goes: its wall time against the sum of its kernels' device times, and its costliest
kernels, each with the launch (grid and block) and options it took on a GPU.

    python -m bench.kernels [--only mlp,cnn_step] [--quick] [--top 8] [--device CUDA]

On a GPU this is what a short loan of one should bring back (`bench/gpu_check.sh` runs it): which kernels are slow
and how they were launched, so that they can be improved on a machine without one. On the CPU the same table
reads the CPU's kernels (their options are not listed)."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

if __package__ in (None, ""):  # `python bench/kernels.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import workloads
from bench.run import CUDA_SKIPS, use_device
from bench.workloads import IMPLS, WORKLOADS_BY_NAME


@dataclass
class StepKernels:
    """One workload's step: `wall` seconds a step, `busy` seconds of device time a step, and per kernel name its
    seconds a step, launches a step and the launch it took (`launches`: name -> "grid (x, y, z) block (...) opts
    [...]", GPU kernels only)."""
    name: str
    wall: float
    busy: float
    seconds: dict[str, float] = field(default_factory=dict)
    count: dict[str, int] = field(default_factory=dict)
    launches: dict[str, str] = field(default_factory=dict)

    def overhead(self) -> str:
        return (f"{self.name}: {self.wall * 1e3:.3f} ms per step, {self.busy * 1e3:.3f} ms of it in "
                f"{sum(self.count.values())} kernels: overhead {100 * (self.wall - self.busy) / self.busy:+.1f}% of "
                "kernel time")

    def table(self, top: int) -> str:
        lines = [self.overhead()]
        for k in sorted(self.seconds, key=self.seconds.get, reverse=True)[:top]:
            lines.append(f"  {self.seconds[k] * 1e6:9.1f} us  {100 * self.seconds[k] / self.busy:5.1f}%  "
                         f"x{self.count[k]:<3d} {k}  {self.launches.get(k, '')}")
        return "\n".join(lines)


class _GpuLaunches:
    """Records each GPU kernel's launch and options as it is rendered (`render_nvptx.kernel_ir`, called on the
    first call's compile), by the kernel's name."""

    def __init__(self) -> None:
        self.by_name: dict[str, str] = {}

    def __enter__(self) -> _GpuLaunches:
        from tgfx.lowering import render_nvptx
        self._orig = orig = render_nvptx.kernel_ir

        def kernel_ir(*args: Any, **kwargs: Any) -> Any:
            out = orig(*args, **kwargs)
            _, name, dims, opts = out
            self.by_name[name] = f"grid {dims.grid} block {dims.block} opts {[(o.op, o.axis, o.amount) for o in opts]}"
            return out
        render_nvptx.kernel_ir = kernel_ir
        return self

    def __exit__(self, *exc: object) -> None:
        from tgfx.lowering import render_nvptx
        render_nvptx.kernel_ir = self._orig


def step_kernels(name: str, sizes: workloads.Sizes, steps: int = 10) -> StepKernels:
    """Run workload `name`'s tgfx step a few times (compiling it), then `steps` more with the devices' profiles on."""
    from tgfx.devices import get_device, opened_devices
    wl = WORKLOADS_BY_NAME[name]
    with _GpuLaunches() as launches:
        case = IMPLS[(name, "tgfx")](sizes, wl.inputs(sizes))
        for _ in range(3):
            case.call()
    get_device("CPU:0")
    devices = opened_devices()
    for dev in devices:
        dev.synchronize()
        dev.clear_profile()
    start = time.perf_counter()
    for _ in range(steps):
        case.call()
    for dev in devices:
        dev.synchronize()
    wall = (time.perf_counter() - start) / steps
    seconds: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for dev in devices:
        for ev in dev.profile_events:
            if not ev.nbytes:   # kernels, not copies
                seconds[ev.name] += (ev.end_ns - ev.start_ns) / 1e9 / steps
                count[ev.name] += 1
    count = {k: -(-v // steps) for k, v in count.items()}
    return StepKernels(name, wall, sum(seconds.values()), dict(seconds), count, launches.by_name)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.kernels", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="mlp,cnn_step,conv2d,mnist_step,vae,softmax,matmul",
                   help=f"comma-separated workloads with a tgfx step, of: {','.join(WORKLOADS_BY_NAME)}")
    p.add_argument("--quick", action="store_true", help="small sizes (the smoke test)")
    p.add_argument("--top", type=int, default=8, help="kernels listed a workload")
    p.add_argument("--device", default="CPU", type=str.upper, choices=["CPU", "CUDA"])
    args = p.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in WORKLOADS_BY_NAME or WORKLOADS_BY_NAME[n].inputs is None]
    if unknown:
        p.error(f"no step to profile for {unknown}")
    if "tgfx" not in sys.modules:   # an empty kernel cache: every kernel is rendered here, so its launch is recorded
        os.environ["TGFX_CACHE_DIR"] = tempfile.mkdtemp(prefix="tgfx-bench-kernels-")
    use_device(args.device)
    sizes = workloads.QUICK if args.quick else workloads.FULL
    for n in names:
        if args.device == "CUDA" and n in CUDA_SKIPS:
            print(f"{n}: not run on CUDA ({CUDA_SKIPS[n]})")
            continue
        print(step_kernels(n, sizes).table(args.top), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
