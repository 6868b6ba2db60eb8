"""The README's by-hand example, run as written (its paths moved to a directory of the test's
own): the files it names are shipped, and the training it starts ends."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
ROOT = Path(__file__).resolve().parents[2]


def by_hand_block() -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"By hand \(.*?```sh\n(.*?)```", text, re.S)
    assert m, "the README has no by-hand example"
    return m.group(1)


def test_the_by_hand_example_runs_as_written(tmp_path):
    block = by_hand_block()
    for config in re.findall(r"--config (\S+)", block):
        assert (ROOT / config).is_file(), f"the README's by-hand example needs {config}"
    # the venv it activates is the set-up line's; here `python` is the test's own (PATH below)
    script = re.sub(r"^\. \.venv/bin/activate\b.*\n", "", block, flags=re.M)
    assert script != block, "the by-hand example no longer activates the set-up line's venv"
    script = script.replace("/tmp/ndnps", str(tmp_path / "run"))
    # the script leaves the forwarder running (holding its output open): the script's
    # session is killed whatever happens, and its output goes to a file
    log = tmp_path / "by-hand.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "-euc", script], cwd=ROOT, start_new_session=True,
                                stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONPATH": str(ROOT),  # `python`: ours
                                     "PATH": f"{Path(sys.executable).parent}:"
                                             f"{os.environ['PATH']}"})
        try:
            rc = proc.wait(timeout=150)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert rc == 0, log.read_text()[-3000:]
    assert (tmp_path / "run" / "model.npz").is_file()
    assert all((tmp_path / "run" / f"gpu{i}.jsonl").stat().st_size > 0 for i in range(1, 5))
