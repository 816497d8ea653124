"""Test setup: every UOp is checked against the IR spec, and hypothesis is derandomised in CI."""
import os
import tempfile

os.environ.setdefault("SPEC", "1")
# compile counts are asserted: every test session starts with an empty on-disk kernel cache of its own
os.environ["TGFX_CACHE_DIR"] = tempfile.mkdtemp(prefix="tgfx-test-cache-")

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))
