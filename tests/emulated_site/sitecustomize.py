"""`GPU_CHECK_EMULATE=1 bash bench/gpu_check.sh`: the GPU machine's check rehearsed on a machine without a GPU.

The script puts this folder first on PYTHONPATH with TGFX_EMULATE_CUDA=1, so every Python process it starts (and
each one those start, as `bench.gpu_ab`'s) has CUDA:0 over the emulating driver of `tests.emulated_cuda` before its
own code runs: the steps' scripts, their arguments and their output are checked, not the GPU's code (the PTX is
rendered and compiled by LLVM, never run)."""
import os

if os.environ.get("TGFX_EMULATE_CUDA") == "1":
    from tests import emulated_cuda

    emulated_cuda.install()
