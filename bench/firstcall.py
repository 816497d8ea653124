"""Child process: the first call of the MLP training step in a fresh interpreter, as one JSON line on stdout.

    python -m bench.firstcall FRAMEWORK CACHE_DIR [--quick]

The clock covers only the first call (trace, compile, run, wait for the result), not the imports or making the
data. CACHE_DIR is the framework's compile cache: an empty folder measures a cold start, the folder a previous child
filled measures a warm one. tgfx reads it from TGFX_CACHE_DIR, which the parent sets before this process starts.
"""
from __future__ import annotations

import json
import os
import sys
import time

if __package__ in (None, ""):  # run as a file: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import workloads


def use_cache(framework: str, cache_dir: str) -> None:
    """Point the framework's persistent compile cache at cache_dir (tgfx's comes from the environment)."""
    if framework == "jax":
        from bench.peers import _jax
        jax = _jax()
        jax.config.update("jax_compilation_cache_dir", cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        try:
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        except AttributeError:  # older jax: no size threshold
            pass


def main(argv: list[str]) -> int:
    framework, cache_dir = argv[0], argv[1]
    sizes = workloads.QUICK if "--quick" in argv else workloads.FULL
    if framework == "tgfx" and os.path.abspath(os.environ.get("TGFX_CACHE_DIR", "")) != os.path.abspath(cache_dir):
        raise SystemExit("bench.firstcall: set TGFX_CACHE_DIR to CACHE_DIR before starting this process")
    if framework != "tgfx":
        from bench import peers  # noqa: F401 - registers the peers' implementations
    use_cache(framework, cache_dir)
    case = workloads.IMPLS[("mlp", framework)](sizes, workloads.mlp_inputs(sizes))
    t0 = time.perf_counter()
    case.call()
    seconds = time.perf_counter() - t0
    loss = float(case.read()[-1])
    print(json.dumps({"seconds": seconds, "loss": loss}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
