"""Run every workload for tgfx and for each installed peer in one process, and print one table.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m bench [--only matmul,mlp] [--repeat 7] [--quick]
        [--frameworks tgfx,numpy] [--device CUDA]

For each (workload, framework): the first call's result is checked against numpy's (allclose), so a wrong result is
reported as WRONG and never timed; then a few warm-up calls, then `--repeat` timed samples, each long enough to
read the clock well (several calls for a tiny workload), and the median is reported. The first-call workload runs
child processes (`bench/firstcall.py`): one with an empty compile cache, one more on the cache that one filled.
The last column is tgfx's time over the best peer's: lower is better, under 1 means tgfx is faster.
"""
from __future__ import annotations

import argparse
import gc
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

if __package__ in (None, ""):  # `python bench/run.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

from bench import workloads
from bench.workloads import IMPLS, WORKLOADS_BY_NAME, Case, Sizes, Workload

FRAMEWORKS = ["tgfx", "numpy", "jax", "torch", "tinygrad"]
PEERS = FRAMEWORKS[1:]
COMPILERS = ["tgfx", "jax", "tinygrad"]  # frameworks with a compile step, so a first call worth measuring
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# what `--device CUDA` does not run, and why
CUDA_SKIPS = {
    "firstcall": "it measures CPU compile times in child processes",
    "copy": "it copies between two CPU devices",
    "allreduce2": "it reduces over CPU devices",
    "allreduce4": "it reduces over CPU devices",
}


@dataclass
class Cell:
    status: str                     # "ok", "wrong", "error"
    seconds: float = math.nan       # median time per call
    note: str = ""                  # what went wrong, or how it was measured


@dataclass
class Row:
    workload: Workload
    title: str
    cells: dict[str, Cell] = field(default_factory=dict)

    def ratio(self, among: list[str] | None = None) -> tuple[float, str] | None:
        """tgfx's time over the fastest peer's (of `among`, default all) that gave the right answer."""
        tg = self.cells.get("tgfx")
        peers = [(c.seconds, fw) for fw, c in self.cells.items()
                 if fw != "tgfx" and c.status == "ok" and (among is None or fw in among)]
        if tg is None or tg.status != "ok" or not peers:
            return None
        best, fw = min(peers)
        return tg.seconds / best, fw


# ---------------------------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------------------------

def time_calls(call: Callable[[], object], repeat: int, min_sample_s: float, budget_s: float) -> float:
    """Median seconds per call over `repeat` samples, after warm-up; each sample runs enough calls to last
    `min_sample_s`, and slow calls get fewer samples (at least 3) to stay near `budget_s`."""
    warm = []
    for _ in range(2):
        t0 = time.perf_counter()
        call()
        warm.append(time.perf_counter() - t0)
    estimate = max(min(warm), 1e-9)
    inner = max(1, math.ceil(min_sample_s / estimate))
    samples = max(3, min(repeat, int(budget_s / (estimate * inner))))
    times = []
    gc.collect()
    gc.disable()  # a collection inside one sample would be noise, not the framework's cost
    try:
        for _ in range(samples):
            t0 = time.perf_counter()
            for _ in range(inner):
                call()
            times.append((time.perf_counter() - t0) / inner)
    finally:
        gc.enable()
    return statistics.median(times)


def mismatch(got: list[np.ndarray], want: list[np.ndarray], wl: Workload) -> str | None:
    """None when every output is allclose to numpy's, else what differs."""
    if len(got) != len(want):
        return f"{len(got)} outputs, numpy has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g = np.asarray(g, dtype=np.float32)
        if g.shape != w.shape:
            return f"output {i}: shape {g.shape}, numpy's is {w.shape}"
        if not np.allclose(g, w, rtol=wl.rtol, atol=wl.atol):
            err = np.abs(g.astype(np.float64) - w)
            return f"output {i}: max abs error {np.nanmax(err):.3g} (rtol={wl.rtol}, atol={wl.atol})"
    return None


def short_error(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0] if msg else ''}"[:160]


def run_case(wl: Workload, fw: str, sizes: Sizes, want: list[np.ndarray], args: argparse.Namespace) -> Cell:
    try:
        case: Case = IMPLS[(wl.name, fw)](sizes, wl.inputs(sizes))
        case.call()
        bad = mismatch(case.read(), want, wl)
        if bad is not None:
            return Cell("wrong", note=bad)
        return Cell("ok", time_calls(case.call, args.repeat, args.min_sample, args.budget))
    except Exception as e:  # a framework that fails on one workload still gets the others measured
        if args.verbose:
            traceback.print_exc()
        return Cell("error", note=short_error(e))


class WrongResult(Exception):
    pass


def first_call_child(fw: str, cache_dir: str, quick: bool) -> tuple[float, float]:
    """(seconds, loss) of the first MLP step in a fresh process using `cache_dir` as the compile cache."""
    env = dict(os.environ, TGFX_CACHE_DIR=cache_dir, CACHEDB=os.path.join(cache_dir, "tinygrad.db"))
    env.setdefault("JAX_PLATFORMS", "cpu")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "bench.firstcall", fw, cache_dir] + (["--quick"] if quick else [])
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"exit status {proc.returncode}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out["seconds"], out["loss"]


def run_first_calls(wl: Workload, frameworks: list[str], sizes: Sizes, args: argparse.Namespace) -> list[Row]:
    """Two rows: the first call with an empty compile cache, and again on the cache that call filled."""
    d = workloads.mlp_inputs(sizes)
    want = np.float32(workloads.np_mlp_step(d["params"], d["x"], d["y"], sizes.lr)[1])
    cold, warm = Row(wl, wl.title(sizes) + ", cold cache"), Row(wl, wl.title(sizes) + ", warm cache")
    pairs = 1 if args.quick else min(args.repeat, 3)
    for fw in (f for f in frameworks if f in COMPILERS):
        progress(f"{wl.name} / {fw}")
        times: dict[str, list[float]] = {"cold": [], "warm": []}
        try:
            for _ in range(pairs):
                cache_dir = tempfile.mkdtemp(prefix=f"bench-{fw}-cache-")
                try:
                    for kind in ("cold", "warm"):
                        seconds, loss = first_call_child(fw, cache_dir, args.quick)
                        bad = mismatch([np.float32(loss)], [want], wl)
                        if bad is not None:
                            raise WrongResult(f"{kind} cache: loss {loss}, numpy's {want}")
                        times[kind].append(seconds)
                finally:
                    shutil.rmtree(cache_dir, ignore_errors=True)
            cold.cells[fw] = Cell("ok", statistics.median(times["cold"]), f"{pairs} fresh processes")
            warm.cells[fw] = Cell("ok", statistics.median(times["warm"]), f"{pairs} fresh processes")
        except WrongResult as e:
            cold.cells[fw] = warm.cells[fw] = Cell("wrong", note=str(e))
        except Exception as e:
            cold.cells[fw] = warm.cells[fw] = Cell("error", note=short_error(e))
        progress_done(cold.cells[fw], wl)
    return [cold, warm]


def progress(what: str) -> None:
    print(f"  {what} ...", end="", file=sys.stderr, flush=True)


def progress_done(cell: Cell, wl: Workload) -> None:
    print(f" {format_cell(cell, wl, None)}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------------------------------------------

def format_time(seconds: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def format_cell(cell: Cell | None, wl: Workload, sizes: Sizes | None) -> str:
    if cell is None:
        return "-"
    if cell.status != "ok":
        return cell.status.upper()
    if wl.metric == "ms":
        return f"{cell.seconds * 1e3:.2f}"
    if wl.metric == "us":
        return f"{cell.seconds * 1e6:.1f}"
    if sizes is None:
        return format_time(cell.seconds)
    scale = 1e9 if wl.metric.startswith("G") else 1
    return f"{wl.work(sizes) / cell.seconds / scale:.1f} ({format_time(cell.seconds)})"


def render_table(rows: list[Row], frameworks: list[str], sizes: Sizes) -> str:
    # the targets for gelu, softmax, the MLP step, first call and dispatch are against JAX: show that too
    vs_jax = "jax" in frameworks
    head = ["workload", "metric", *frameworks, "tgfx/best peer", *(["tgfx/jax"] if vs_jax else [])]
    body = []
    for row in rows:
        r, rj = row.ratio(), row.ratio(["jax"])
        body.append([row.title, row.workload.metric,
                     *(format_cell(row.cells.get(fw), row.workload, sizes) for fw in frameworks),
                     f"{r[0]:.2f} ({r[1]})" if r else "-", *([f"{rj[0]:.2f}" if rj else "-"] if vs_jax else [])])
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]

    def line(cols: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cols, widths,
                                                                                              strict=True)))
    return "\n".join([line(head), "  ".join("-" * w for w in widths), *map(line, body)])


def version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_lines(frameworks: list[str]) -> list[str]:
    import llvmlite
    import llvmlite.binding as llvm
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    libs = [f"python {platform.python_version()}", f"numpy {np.__version__}",
            f"llvmlite {llvmlite.__version__} (LLVM {'.'.join(map(str, llvm.llvm_version_info))})",
            f"tgfx {version('tgfx') or '(not installed, from source)'}"]
    for fw, dists in (("jax", ("jax", "jaxlib")), ("torch", ("torch",)), ("tinygrad", ("tinygrad",))):
        if fw in frameworks:
            libs.append(" ".join(f"{d} {version(d) or '?'}" for d in dists))
    blas = [k for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
            if k in os.environ]
    lines = [f"machine: {llvm.get_host_cpu_name()} ({model or platform.processor() or 'unknown model'}), "
             f"{cores} cores ({usable} usable), {platform.system()} {platform.machine()}",
             "libraries: " + ", ".join(libs)]
    if os.environ.get("TGFX_CPU") or os.environ.get("TGFX_CORES"):   # tgfx's code for another machine, run on this one
        from tgfx.devices.target import host_target
        t = host_target()
        lines.append(f"tgfx code for: {t.cpu} (TGFX_CPU; {t.vector_bytes}-byte vectors, {t.vector_registers} vector "
                     f"registers), {t.cores} cores (TGFX_CORES), run on this machine")
    if hasattr(os, "getloadavg"):
        load = os.getloadavg()
        busy = load[0] > 0.5 * (usable or 1)
        lines.append(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}" +
                     (" (other processes are using the CPU: the timings are noisy)" if busy else ""))
    if blas:
        lines.append("warning: " + ", ".join(f"{k}={os.environ[k]}" for k in blas) + " is set and changes numpy's "
                     "BLAS; run with `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m bench` to compare")
    return lines


# ---------------------------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="", help=f"comma-separated workloads, of: {','.join(WORKLOADS_BY_NAME)}")
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                   help="comma-separated frameworks to run, of: " + ",".join(FRAMEWORKS) + " (tgfx and numpy always "
                        "run; a peer that is not installed is skipped)")
    p.add_argument("--repeat", type=int, default=None,
                   help="timed samples per measurement, the median is reported (default 7, 3 with --quick)")
    p.add_argument("--quick", action="store_true", help="small sizes and short samples (the smoke test)")
    p.add_argument("--budget", type=float, default=20.0, help="about how many seconds to spend timing one cell")
    p.add_argument("-v", "--verbose", action="store_true", help="print the full traceback of any failure")
    p.add_argument("--device", default="CPU", type=str.upper, choices=["CPU", "CUDA"],
                   help="where tgfx and the peers run: CPU (default), or CUDA (tgfx on CUDA:0 through TGFX_DEVICE, "
                        "jax and torch on their GPU builds; numpy stays the reference on the CPU)")
    args = p.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(WORKLOADS_BY_NAME)
    unknown = [n for n in names if n not in WORKLOADS_BY_NAME]
    if unknown:
        p.error(f"unknown workload(s) {unknown}; the workloads are {list(WORKLOADS_BY_NAME)}")
    args.workloads = [WORKLOADS_BY_NAME[n] for n in names]
    args.skipped_rows = []
    if args.device == "CUDA":
        args.skipped_rows = [f"{w.name} ({CUDA_SKIPS[w.name]})" for w in args.workloads if w.name in CUDA_SKIPS]
        args.workloads = [w for w in args.workloads if w.name not in CUDA_SKIPS]
    asked = [f for f in args.frameworks.split(",") if f]
    bad = [f for f in asked if f not in FRAMEWORKS]
    if bad:
        p.error(f"unknown framework(s) {bad}; the frameworks are {FRAMEWORKS}")
    args.asked = ["tgfx", "numpy", *(f for f in PEERS[1:] if f in asked)]
    args.repeat = max(1, args.repeat or (3 if args.quick else 7))
    args.min_sample = 0.002 if args.quick else 0.05
    if args.quick:
        args.budget = min(args.budget, 2.0)
    return args


def use_device(device: str) -> None:
    """Make tgfx and the peers run on `device`: tgfx's default device is read when tgfx is imported, so this comes
    first."""
    os.environ["BENCH_DEVICE"] = device
    if device == "CPU":
        return
    if "tgfx" in sys.modules and os.environ.get("TGFX_DEVICE", "").upper() not in ("CUDA", "CUDA:0"):
        raise SystemExit("--device CUDA: tgfx was imported before the benchmark set TGFX_DEVICE; run "
                         "`TGFX_DEVICE=CUDA python -m bench --device CUDA`")
    os.environ["TGFX_DEVICE"] = "CUDA"
    os.environ.setdefault("JAX_PLATFORMS", "cuda,cpu")
    # float32 products in float32 on the GPU too (jax's default there is TF32, whose results the check rejects)
    os.environ.setdefault("JAX_DEFAULT_MATMUL_PRECISION", "highest")
    os.environ.setdefault("BENCH_TINYGRAD_DEVICE", "CUDA")


def gpu_line() -> str:
    """The GPU tgfx runs on, for the table's header (or why there is none)."""
    try:
        from tgfx.devices import get_device
        dev = get_device("CUDA:0")
        return f"{dev.gpu_name}, sm_{dev.attrs['cc_major']}{dev.attrs['cc_minor']}, {dev.attrs['sm_count']} SMs"
    except Exception as e:  # noqa: BLE001 -- the header says why; every tgfx row then says it too
        return f"no GPU: {short_error(e)}"


def installed(fw: str) -> bool:
    return fw in ("tgfx", "numpy") or importlib.util.find_spec(fw) is not None


def run(argv: list[str] | None = None) -> tuple[list[Row], list[str]]:
    """Run the benchmark and print it; returns the rows and the frameworks that ran (for tests)."""
    args = parse_args(argv)
    use_device(args.device)
    sizes = workloads.QUICK if args.quick else workloads.FULL
    frameworks = [f for f in args.asked if installed(f)]
    skipped = [f"{f} (not installed)" for f in args.asked if f not in frameworks]
    if any(f in PEERS[1:] for f in frameworks):
        from bench import peers  # registers the peers' implementations
        for fw in [f for f in frameworks if f in PEERS[1:]]:
            why = peers.unusable(fw)
            if why is not None:
                frameworks.remove(fw)
                skipped.append(f"{fw} (cannot run: {why})")

    print("tgfx benchmark" + (" (--quick: small sizes, not comparable)" if args.quick else ""))
    for line in machine_lines(frameworks):
        print(line)
    print(f"frameworks: {', '.join(frameworks)}" + (f"; skipped: {', '.join(skipped)}" if skipped else ""))
    where = "the CPU" if args.device == "CPU" else f"CUDA ({gpu_line()})"
    print(f"float32 on {where}; median of {args.repeat} timed samples after warm-up", flush=True)
    if args.skipped_rows:
        print(f"not run on {args.device}: {', '.join(args.skipped_rows)}")

    rows: list[Row] = []
    for wl in args.workloads:
        print(f"{wl.name}:", file=sys.stderr, flush=True)
        if wl.inputs is None:
            rows += run_first_calls(wl, frameworks, sizes, args)
            continue
        row = Row(wl, wl.title(sizes))
        want = workloads.reference(wl.name, sizes, wl.inputs(sizes))
        for fw in frameworks:
            if (wl.name, fw) in IMPLS:
                progress(f"{wl.name} / {fw}")
                row.cells[fw] = run_case(wl, fw, sizes, want, args)
                progress_done(row.cells[fw], wl)
        rows.append(row)

    print()
    print(render_table(rows, frameworks, sizes))
    print()
    for row in rows:
        for fw, cell in row.cells.items():
            if cell.status != "ok":
                print(f"{cell.status.upper()}: {row.title} / {fw}: {cell.note}")
    failed = [row.title for row in rows if row.cells.get("tgfx") is None or row.cells["tgfx"].status != "ok"]
    if failed:
        print(f"tgfx NOT verified on {len(failed)} of {len(rows)} rows: {'; '.join(failed)}")
    else:
        print(f"verified: every tgfx result matches numpy (allclose) on all {len(rows)} rows")
    if any(row.workload.name == "mlp" and "tgfx" in row.cells for row in rows):
        print(mlp_overhead(sizes))
    if skipped:
        print(f"skipped: {', '.join(skipped)}")
    if hasattr(os, "getloadavg"):
        print("load average at the end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return rows, frameworks


def mlp_overhead(sizes: Sizes, steps: int = 20) -> str:
    """How much of tgfx's jitted MLP step is not kernel time: wall time of a step against the sum of its kernels'
    device durations (`bench/kernels.py`)."""
    from bench.kernels import step_kernels
    return "mlp step overhead: " + step_kernels("mlp", sizes, steps).overhead().removeprefix("mlp: ")


def main(argv: list[str] | None = None) -> int:
    rows, _ = run(argv)
    ok = all(row.cells.get("tgfx") is not None and row.cells["tgfx"].status == "ok" for row in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
