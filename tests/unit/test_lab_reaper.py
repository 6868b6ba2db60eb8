"""The reaper (ndnps.lab.reaper): what a run leaves in the kernel and the temp dir goes when
the run goes, however it goes — here with a short socket directory named for its owner, the
owner killed outright and not yet reaped by its parent (a zombie still has its /proc entry)."""
from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from ndnps.lab import reaper
from ndnps.lab.process import owner_alive, owner_tag

pytestmark = pytest.mark.timeout(60)


def sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_a_zombie_owner_is_not_alive():
    child = sleeper()
    tag = owner_tag(child.pid)
    assert owner_alive(tag)
    child.send_signal(signal.SIGKILL)
    threading.Event().wait(0.3)                        # dead, not reaped: a zombie
    try:
        assert not owner_alive(tag)
    finally:
        child.wait()
    assert not owner_alive(tag) and not owner_alive("nonsense")


def test_the_reaper_removes_a_killed_owners_leftovers_once_it_is_gone():
    owner = sleeper()
    tag = owner_tag(owner.pid)
    left = Path(tempfile.mkdtemp(prefix=f"{reaper.SOCKET_DIR_PREFIX}{tag}-"))
    (left / "fwd.sock").write_text("")
    mine = Path(tempfile.mkdtemp(prefix=f"{reaper.SOCKET_DIR_PREFIX}{owner_tag()}-"))
    proc = reaper.start(tag)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(1.0)                              # waits while its owner runs
        assert left.exists()
        owner.send_signal(signal.SIGKILL)               # no chance to clean up
        assert proc.wait(20) == 0
        assert not left.exists()
        assert mine.exists()                            # a live owner's is not touched
    finally:
        owner.kill()
        owner.wait()
        proc.kill()
        proc.wait()
        for d in (left, mine):
            if d.exists():
                for f in d.iterdir():
                    f.unlink()
                d.rmdir()


def test_a_bad_argument_is_refused():
    assert reaper.main(["x"]) == 2
