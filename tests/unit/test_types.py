"""The type hints hold: mypy over every package ([tool.mypy] in pyproject.toml), no errors."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

pytestmark = pytest.mark.timeout(300)


def test_mypy_finds_no_errors(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
