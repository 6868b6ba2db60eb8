"""What is left running: the live processes whose command line names a path (a run directory),
read from /proc, and the network namespaces and socket directories of ended runs — a test
that started a run checks that it left none."""
from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable


def processes_naming(text: str) -> list[tuple[int, str]]:
    """Live processes (not zombies, not this one) whose command line mentions `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if text in cmd and state != "Z":
            found.append((int(entry.name), cmd))
    return found


def namespaces_left(grace: float = 5.0) -> list[str]:
    """The network namespaces of runs that have ended (`Netns.owned` names them after their
    owner process, now gone) still there after `grace` s: what a finished run left behind."""
    from ndnps.lab.netns import PREFIX
    return _of_ended_runs(namespaces, PREFIX, grace)


def namespaces() -> list[str]:
    """Every network namespace's name (`ip netns list`)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def socket_dirs_left(grace: float = 5.0) -> list[str]:
    """The short socket directories (`ndnps-sock-<owner tag>-*` in the temp dir) of runs that
    have ended still there after `grace` s."""
    from ndnps.lab.reaper import SOCKET_DIR_PREFIX
    return _of_ended_runs(lambda: os.listdir(tempfile.gettempdir()), SOCKET_DIR_PREFIX, grace)


def _of_ended_runs(names: Callable[[], list[str]], prefix: str, grace: float) -> list[str]:
    """Of `names()`, those `prefix<owner tag>-...` whose owner is gone, polled for `grace` s:
    a run going on at the same time (another xdist worker's) is not counted, and one killed
    outright has its reaper remove what it left within the grace."""
    from ndnps.lab.process import owner_alive

    def left() -> list[str]:
        return [n for n in names() if n.startswith(prefix)
                and not owner_alive(n[len(prefix):].split("-", 1)[0])]

    deadline = time.monotonic() + grace
    while (found := left()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return found
