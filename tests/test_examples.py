"""The README's main example runs and learns; data-parallel on two devices gives the same result (needs sklearn)."""
import importlib.util
import os
import sys

import pytest

pytest.importorskip("sklearn")
_PATH = os.path.join(os.path.dirname(__file__), "..", "examples", "train_digits.py")


def _example():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("train_digits", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["train_digits"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_train_digits_learns_and_data_parallel_matches(capsys: pytest.CaptureFixture) -> None:
    ex = _example()
    one = ex.main(["--epochs", "4"])
    two = ex.main(["--epochs", "4", "--devices", "2"])
    out = capsys.readouterr().out
    assert one > 0.85 and one == two
    assert "traced 1 time(s)" in out
