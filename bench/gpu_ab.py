"""One codegen flag on and off for an n^3 matmul, each in a process of its own, beside torch's matmul of the dtype
(cuBLAS) when torch has CUDA: `bench/gpu_check.sh`'s A/B steps (issue #16's matmul goals).

    python -m bench.gpu_ab GPU_SMEM float32            # fp32 4096^3, shared-memory tiles on and off
    python -m bench.gpu_ab GPU_TC bfloat16             # bf16 4096^3 (float32 sums), tensor cores on and off
    python -m bench.gpu_ab GPU_TC bfloat16 --device CPU --n 256   # the same steps where there is no GPU

Each process times the kernel by tgfx's profile (the best of 10 launches) and checks 64 rows against float64;
exit status 1 when a process failed.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

# (run in a process of its own: the flag is read when tgfx is imported)
RUN = r"""
import sys
import numpy as np, tgfx as tg
from tgfx.devices import get_device
n, dtype, device = int(sys.argv[1]), getattr(tg.dtypes, sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(0)
x, w = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
a, b = (tg.device_put(tg.asarray(v).astype(dtype), device) for v in (x, w))
dev = get_device(device)
c = (a @ b).astype(tg.dtypes.float32).numpy()
want = a[:64].astype(tg.dtypes.float32).numpy().astype(np.float64) @ b.astype(tg.dtypes.float32).numpy()
err = (np.abs(c[:64] - want) / (np.abs(want) + 1)).max()
dev.synchronize()
dev.clear_profile()
for _ in range(10):
    c = a @ b
c.numpy()
dev.synchronize()
ms = min((e.end_ns - e.start_ns) / 1e6 for e in dev.profile_events if not e.nbytes and e.name.startswith("r_"))
print(f"{ms:.3f} {err:.2e}")
"""


def torch_ms(n: int, dtype: str) -> float | None:
    """torch's best of 10 n^3 matmuls in `dtype` by CUDA events (TF32 off), or None without torch's CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    x, w = (torch.randn(n, n, device="cuda", dtype=getattr(torch, dtype)) for _ in range(2))
    x @ w
    best = float("inf")
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        x @ w
        e.record()
        torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e))
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("flag", help="the codegen flag turned on (1) and off (0): GPU_SMEM, GPU_TC")
    p.add_argument("dtype", help="the operands' dtype: float32, bfloat16, float16")
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--device", default="CUDA")
    p.add_argument("--timeout", type=float, default=60)
    args = p.parse_args(argv)
    flops = 2 * args.n ** 3
    times = {}
    for value in ("1", "0"):
        env = {**os.environ, "TGFX_DEVICE": args.device.split(":")[0], args.flag: value}
        try:
            r = subprocess.run([sys.executable, "-c", RUN, str(args.n), args.dtype, args.device], env=env,
                               capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired as e:   # the other value, and cuBLAS's time, are still worth the run
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
            print(f"{args.flag}={value} timed out after {args.timeout:g} s:", err[-1500:])
            continue
        if r.returncode:
            print(f"{args.flag}={value} failed:", r.stderr[-1500:])
            continue
        ms, err = r.stdout.split()[-2:]
        times[value] = float(ms)
        print(f"tgfx {args.dtype} {args.n}^3 {args.flag}={value}: {float(ms):.3f} ms, "
              f"{flops / float(ms) / 1e9:.1f} TFLOP/s, max rel err {err}")
    best = torch_ms(args.n, args.dtype) if args.device.startswith("CUDA") else None
    if best is None:
        print("no torch with CUDA: no cuBLAS time beside")
    else:
        print(f"torch {args.dtype} (cuBLAS): {best:.3f} ms, {flops / best / 1e9:.1f} TFLOP/s")
        for value, ms in times.items():
            print(f"tgfx / torch rate, {args.flag}={value}: {best / ms:.2f}")
    return 0 if len(times) == 2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
