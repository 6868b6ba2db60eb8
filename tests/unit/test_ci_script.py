"""CI's test step (.ci/pytest, which .ci/run calls in its fresh virtual environment) fails when
no test ran: pytest's "no tests collected" is not a pass."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]


def test_a_run_that_collects_no_test_fails():
    # with xdist's workers, as CI runs the suite (.ci/pytest: -n 2)
    done = subprocess.run([str(ROOT / ".ci" / "pytest"), sys.executable, "-n", "2",
                           "tests/unit/test_ci_script.py", "-k", "no_test_is_named_like_this_zz9",
                           "-q"],
                          cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert done.returncode == 5, done.stdout[-1000:] + done.stderr[-1000:]
    assert "no test ran" in done.stderr


def test_a_run_that_passes_passes_and_run_calls_it():
    done = subprocess.run([str(ROOT / ".ci" / "pytest"), sys.executable,
                           "tests/unit/test_fw_status.py", "-q"],
                          cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-1000:]
    assert ".ci/pytest" in (ROOT / ".ci" / "run").read_text()
