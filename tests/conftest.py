"""Shared fixtures: real forwarder processes on sockets in a per-test directory; every
process a test starts is stopped when it ends, pass or fail."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# child processes (python -m ndnps.forwarder ...) import the project from the checkout too
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

from ndnps.lab.process import ManagedProcess, start_forwarder  # noqa: E402


class Procs:
    """Starts processes for one test and stops them all at its end."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[ManagedProcess] = []
        self.by_name: dict[str, ManagedProcess] = {}

    def forwarder(self, name: str = "fwd", **kw) -> str:
        proc, sock = start_forwarder(name, self.workdir, **kw)
        self.started.append(proc)
        self.by_name[name] = proc
        return sock

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> ManagedProcess:
        proc = ManagedProcess(name, argv, self.workdir / f"{name}.log", env=env)
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.started):
            proc.stop()


@pytest.fixture
def procs() -> Procs:
    # unix socket paths must stay short (108 bytes): use a short temp dir
    workdir = Path(tempfile.mkdtemp(prefix="ndnps-"))
    p = Procs(workdir)
    yield p
    p.stop_all()
    if not os.environ.get("NDNPS_KEEP_TEST_DIRS"):     # set it to keep logs for debugging
        shutil.rmtree(workdir, ignore_errors=True)
