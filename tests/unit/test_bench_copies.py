"""bench.micro.copies' allocation counter (bench/micro/allocations.py): a copy of n bytes is
one buffer with its n bytes written, a view none, a buffer never filled one with nothing
written; and the push path's forwarder copies no segment (skipped without a C compiler)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.micro.allocations import build_shim
from bench.micro.copies import ROOT

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None,
                                reason="no C compiler to build the allocation counter")

PROBE = """
import json
import numpy as np
from bench.micro.allocations import Counter
c = Counter()
b = b"x" * 20000
c.arm(10000)
view = memoryview(b)[1:]
after_view = c.read()
copy = bytes(view)
after_copy = c.read()
c.arm(10000)
empty = np.empty(5000, np.float32)
print(json.dumps([after_view, after_copy, c.read()]))
"""


@pytest.mark.timeout(120)
def test_a_copy_is_one_buffer_written_a_view_none(tmp_path: Path):
    lib = build_shim(tmp_path)
    assert isinstance(lib, Path), lib
    env = {**os.environ, "LD_PRELOAD": str(lib), "PYTHONMALLOC": "malloc",
           "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=100, check=True).stdout
    view, copy, empty = json.loads(out.strip().splitlines()[-1])
    assert view == [0, 0, 0]
    count, size, written = copy
    assert count == 1 and 19999 <= written <= size < 19999 + 100     # the object's header too
    assert empty[0] == 1 and empty[1] >= 20000 and empty[2] == 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_forwarder_copies_no_pushed_segment():
    out = subprocess.run([sys.executable, "-m", "bench.micro.copies", "--json",
                          "--versions", "2"], cwd=ROOT, capture_output=True, text=True,
                         timeout=280, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert "error" not in result, result["error"]
    assert result["segments"] > 0
    for part in ("ps", "worker", "collect_worker", "collect_ps", "framing"):
        assert isinstance(result[part], float)
    # one pushed Data in, the same bytes out to each worker (only table growth is counted)
    assert result["forwarder"] < 0.2
    assert result["forwarder_copies_out_per_segment"] == 2.0
