"""Test setup: every UOp is checked against the IR spec, and hypothesis is derandomised in CI."""
import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator

os.environ.setdefault("SPEC", "1")
# compile counts are asserted: every test session starts with an empty on-disk kernel cache of its own
os.environ["TGFX_CACHE_DIR"] = tempfile.mkdtemp(prefix="tgfx-test-cache-")


def _remove_session_cache(path: str = os.environ["TGFX_CACHE_DIR"], pid: int = os.getpid()) -> None:
    """The session's cache goes with the session (each was left in the temp folder: 1,825 of them, 7.1 GB, on the
    host of the twenty-seventh session, up to 143 MB each). Only by the process that made it: a forked child of a
    test that exits normally runs this process's exit handlers too. Registered before tgfx is imported, it runs after
    tgfx's own exit handlers (atexit runs last-registered first), which may still write to the directory."""
    if os.getpid() == pid:
        shutil.rmtree(path, ignore_errors=True)


atexit.register(_remove_session_cache)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


_WIDE = ("float64", "int64", "uint64")


def _is_64_bit_type(v: object) -> bool:
    """A dtype parameter naming a 64-bit type: a tgfx DType, a numpy dtype or scalar type, or its name ("f8")."""
    from tgfx.dtypes import DType
    if isinstance(v, (tuple, list)):
        return any(_is_64_bit_type(x) for x in v)
    if isinstance(v, DType):
        return v.name in _WIDE
    if isinstance(v, np.dtype) or isinstance(v, type) and issubclass(v, np.generic):
        return np.dtype(v).name in _WIDE
    return isinstance(v, str) and v in (*_WIDE, "f8", "i8", "u8")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `gpu` skip, saying why, where no CUDA driver loads or it reports no GPU."""
    gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu:
        return
    from tgfx.devices.cuda import device_count
    try:
        reason = None if device_count() else "the CUDA driver reports no GPU on this machine"
        if "tests.emulated_cuda" in sys.modules:
            reason = "CUDA:0 is the emulating driver of -p tests.emulated_cuda"
    except Exception as e:  # noqa: BLE001 -- no driver, or one that fails to initialise: the reason is its message
        reason = f"{type(e).__name__}: {e}"
    if reason is not None:
        for item in gpu:
            item.add_marker(pytest.mark.skip(reason=f"needs an NVIDIA GPU: {reason}"))


@pytest.fixture(autouse=True)
def _x64_mode(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests that compare with numpy's 64-bit types run in tgfx's x64 mode (JAX's `jax_enable_x64`): those marked
    `x64`, and those parametrised with a 64-bit dtype. Every other test runs in the 32-bit default users get."""
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    if request.node.get_closest_marker("x64") is None and not any(map(_is_64_bit_type, params.values())):
        yield
        return
    from tgfx.config import Context
    with Context(TGFX_ENABLE_X64=1):
        yield
