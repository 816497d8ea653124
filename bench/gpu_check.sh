#!/usr/bin/env bash
# One run on a machine with an NVIDIA GPU that tells what works there (issue #16): the driver and the GPU, the GPU
# tests (`pytest -m gpu`), a small program end to end on CUDA:0, `python -m bench --device CUDA` beside the peers
# that have CUDA builds, where the GPU steps' time goes (`python -m bench.kernels`), the 4096^3 matmul with
# shared-memory tiles on and off (GPU_SMEM) beside cuBLAS, and the bfloat16 one on tensor cores and off (GPU_TC). Every step has its own time limit, prints what failed and
# goes on; a summary ends the run. The whole run stays under 8 minutes: the steps' limits sum to 7 (`test_bench_smoke`
# checks it), and no step runs past GPU_CHECK_TOTAL seconds (450) from the start (one given less time says so).
#
#   bash bench/gpu_check.sh                # from the repository root (or anywhere: it finds the root itself)
#   GPU_CHECK_INSTALL_PEERS=1 bash bench/gpu_check.sh   # also pip-install jax[cuda12] and torch (network needed)
#   GPU_CHECK_EMULATE=1 GPU_CHECK_AB_N=1024 bash bench/gpu_check.sh   # rehearsed without a GPU: every Python process
#       on the emulating driver (tests/emulated_site), the A/B matmuls at 1024^3 (the smallest that stages shared
#       tiles); the machine and driver steps fail there, every other step is to pass
#
# Logs go to $OUT/gpu_check (the device runner's output folder) or /tmp/gpu_check; each step's tail is printed.
# Seen on 2026-12-04 on one H200 (driver 580.159, CUDA 13.0, python 3.12, numpy 2.5, llvmlite 0.50 with LLVM 22, jax and
# torch CUDA builds already installed): every step ran in 83-126 s, the results are in bench/README.md.
set -u
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 2
LOGS="${OUT:-/tmp}/gpu_check"
mkdir -p "$LOGS"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"   # tgfx from this checkout, installed or not
TGFX_CACHE_DIR="$(mktemp -d /tmp/tgfx_gpu_cache.XXXXXX)"   # a cold kernel cache: compiles are checked too
export TGFX_CACHE_DIR
SCALE="${GPU_CHECK_LIMIT_SCALE:-1}"   # every limit times this (a rehearsal's kernels are loops on a CPU's cores)
if [ "${GPU_CHECK_EMULATE:-0}" = 1 ]; then   # no GPU: each Python process on the emulating driver
    export TGFX_EMULATE_CUDA=1 PYTHONPATH="$REPO/tests/emulated_site:$PYTHONPATH"
    SCALE="${GPU_CHECK_LIMIT_SCALE:-10}"
fi
PY="${PYTHON:-python3}"
START=$(date +%s)
TOTAL="${GPU_CHECK_TOTAL:-$(( 450 * SCALE ))}"   # seconds from the start past which no step runs (the lease: 15 min)
SUMMARY=()

step() {   # step NAME LIMIT_SECONDS COMMAND...: run it with a time limit, log it, record the outcome
    local name="$1" limit="$2"; shift 2
    local log="$LOGS/$name.log" t0 rc status left
    t0=$(date +%s)
    limit=$(( limit * SCALE ))
    left=$(( START + TOTAL - t0 - 5 ))
    if [ "$left" -lt 10 ]; then
        SUMMARY+=("$(printf '%-10s %-14s %4ss  %s' "$name" "NOT RUN" 0 "no time left of GPU_CHECK_TOTAL=${TOTAL}s")")
        echo "=== $name: not run, ${TOTAL}s of the run are spent"
        return
    fi
    [ "$left" -lt "$limit" ] && limit=$left
    echo "=== $name (limit ${limit}s): $*"
    timeout --kill-after=5 "$limit" "$@" >"$log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q "[0-9] skipped" "$log" && ! grep -q "[0-9] passed" "$log"; then status="SKIPPED"
    elif [ $rc -eq 0 ]; then status="OK"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="TIMEOUT"
    else status="FAIL(rc=$rc)"; fi
    tail -n "${TAIL:-25}" "$log"
    SUMMARY+=("$(printf '%-10s %-14s %4ss  %s' "$name" "$status" "$(( $(date +%s) - t0 ))" "$log")")
    echo
}

# 1. the machine: GPU, driver, Python
step machine 15 bash -c 'nvidia-smi || echo "nvidia-smi not found"; uname -a; '"$PY"' --version; \
    (command -v ptxas && ptxas --version | tail -1) || echo "no ptxas on PATH (the driver JIT needs none)"'

# 2. what tgfx needs to run and test; installed only when missing (the device machine may have no network)
if "$PY" -c "import numpy, llvmlite, pytest, hypothesis" 2>/dev/null; then
    SUMMARY+=("$(printf '%-10s %-14s %4ss  %s' install "SKIP" 0 "numpy, llvmlite, pytest, hypothesis importable")")
else
    step install 60 "$PY" -m pip install -q -e ".[test]"
fi
if [ "${GPU_CHECK_INSTALL_PEERS:-0}" = 1 ]; then
    step peers 90 "$PY" -m pip install -q "jax[cuda12]" torch
fi

# 3. the driver as tgfx sees it: devices, attributes, the GPU target, one context with both streams
step driver 20 "$PY" - <<'EOF'
import time
t0 = time.perf_counter()
from tgfx.devices import cuda
drv = cuda.load_driver()
print("driver version", drv.cuDriverGetVersion(), "devices", drv.cuDeviceGetCount())
import tgfx as tg
print("tg.devices('cuda'):", tg.devices("cuda"))
from tgfx.devices import get_device
dev = get_device("CUDA:0")
print(dev.gpu_name, dev.attrs)
try:
    print("target:", dev.target)
except Exception as e:
    print("no GPU target:", type(e).__name__, e)
print(f"opened CUDA:0 in {time.perf_counter() - t0:.2f} s")
EOF

# 4. the GPU tests (the runtime's, and any other file with gpu-marked tests)
GPU_TESTS=$(grep -l "pytest.mark.gpu" tests/test_*.py 2>/dev/null | tr '\n' ' ')
# shellcheck disable=SC2086
step gpu-tests 50 "$PY" -m pytest -p no:xdist -p no:cacheprovider -m gpu -rs ${GPU_TESTS:-tests/test_cuda_runtime.py}

# 5. a small program end to end on CUDA:0 (its kernels listed with DEBUG=1), checked against numpy
step program 25 env TGFX_DEVICE=CUDA DEBUG=1 "$PY" - <<'EOF'
import numpy as np, tgfx as tg, tgfx.numpy as tnp
rng = np.random.default_rng(0)
x = rng.standard_normal((256, 128)).astype(np.float32)
w = rng.standard_normal((128, 64)).astype(np.float32)
t, tw = tg.asarray(x), tg.asarray(w)
print("on", t.device)
checks = {
    "elementwise": ((t * 2 + 1).numpy(), x * 2 + 1),
    "reduce": (tnp.sum(t, axis=1).numpy(), x.sum(axis=1)),
    "matmul": ((t @ tw).numpy(), x @ w),
    "softmax": (tg.nn.softmax(t, axis=1).numpy(), np.exp(x) / np.exp(x).sum(1, keepdims=True)),
    "jit tanh": (tg.jit(lambda a: tnp.tanh(a) * a)(t).numpy(), np.tanh(x) * x),
    "grad": (tg.grad(lambda a: (a * a).sum())(t).numpy(), 2 * x),
}
bad = 0
for name, (got, want) in checks.items():
    ok = np.allclose(got, want, rtol=1e-4, atol=1e-4)
    bad += not ok
    print(f"{name:12s} {'ok' if ok else 'WRONG: max err %.3g' % np.abs(got - want).max()}")
raise SystemExit(bad)
EOF

# 6. the op, gradient and jit tests with CUDA:0 as the default device: every kernel they compile runs on the GPU
# (a test that names "CPU:0" as where a result lies fails here for that reason alone: read the failures' messages)
OPS_TESTS="${GPU_CHECK_TESTS:-tests/test_ops_elementwise.py tests/test_ops_reduce.py tests/test_ops_movement.py \
tests/test_grad.py tests/test_jit.py}"
WORKERS=()   # test workers where pytest-xdist is installed (without it, `-n` is an error and the step is lost)
if "$PY" -c "import xdist" 2>/dev/null; then WORKERS=(-n "${GPU_CHECK_WORKERS:-8}"); fi
# shellcheck disable=SC2086   # (OPS_TESTS and GPU_TESTS are lists of files)
step ops 70 env TGFX_DEVICE=CUDA "$PY" -m pytest -q ${WORKERS[@]+"${WORKERS[@]}"} -p no:cacheprovider --maxfail=60 $OPS_TESTS

# 7. the benchmark on CUDA, beside jax and torch where their CUDA builds import (short samples: a first look)
TAIL=40 step bench 80 "$PY" -m bench --device CUDA --repeat 3 --budget 1 --frameworks tgfx,numpy,jax,torch \
    --only "${GPU_CHECK_BENCH:-matmul,gelu,softmax,mlp,dispatch,mnist_step,conv2d}"

# 8. where the GPU steps go: wall time against kernel time, and the costliest kernels with the grid, block and options
# each took (what a session without a GPU needs to improve them)
TAIL=80 step kernels 45 env TGFX_DEVICE=CUDA "$PY" -m bench.kernels --device CUDA --top 6 \
    --only "${GPU_CHECK_KERNELS:-mlp,cnn_step,conv2d,mnist_step,vae,softmax}"

# 9. what a search finds where the heuristics may be wrong: the same table with BEAM-searched options for the
# contractions (compare each kernel's time and options with step 8's)
if [ "${GPU_CHECK_BEAM:-1}" = 1 ]; then
    TAIL=30 step beam 35 env TGFX_DEVICE=CUDA BEAM=2 BEAM_BUDGET=8 "$PY" -m bench.kernels --device CUDA --top 3 \
        --only "${GPU_CHECK_BEAM_ONLY:-matmul,conv2d}"
fi

# 10. the issue's matmul goal (fp32 4096^3 >= 0.6 of cuBLAS) with shared-memory tiles on and off (GPU_SMEM=1 / 0,
# each in a process of its own): the kernel's time from tgfx's profile (the best of 10), torch's from CUDA events
TAIL=12 step smem-ab 45 "$PY" -m bench.gpu_ab GPU_SMEM float32 --n "${GPU_CHECK_AB_N:-4096}" --timeout 18

# 11. the stretch goal: a bfloat16 4096^3 matmul (float32 sums) on tensor cores (mma.sync, GPU_TC=1) and without
# (GPU_TC=0: float32 FMA tiles), beside torch's bfloat16 matmul (cuBLAS)
TAIL=12 step tc-ab 35 "$PY" -m bench.gpu_ab GPU_TC bfloat16 --n "${GPU_CHECK_AB_N:-4096}" --timeout 14

echo "=== summary ($(( $(date +%s) - START )) s in all; logs in $LOGS)"
for line in "${SUMMARY[@]}"; do echo "$line"; done
