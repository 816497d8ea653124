"""tgfx's benchmark harness: each workload for tgfx and for every installed peer, side by side, in one run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m bench [--only matmul,gelu] [--repeat 9] [--quick]

`bench/workloads.py` holds the workloads and their numpy and tgfx implementations, `bench/peers.py` those of jax,
torch and tinygrad; `bench/run.py` checks and times them and prints the table; `bench/firstcall.py` is the child
process that measures a first call in a fresh interpreter. bench/README.md has the method and the latest table.
"""
