"""What is left running: the live processes whose command line names a path (a run directory),
read from /proc, and the network namespaces of ended runs — a test that started a run checks
that it left none."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path


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
    owner process, now gone) still there after `grace` s: what a finished run left behind. A
    run going on at the same time (another xdist worker's) owns its namespaces and is not
    counted; one killed outright has its namespaces removed by its reaper within the grace."""
    from ndnps.lab.netns import PREFIX, owner_alive

    def left() -> list[str]:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        names = [line.split()[0] for line in out.splitlines() if line.startswith(PREFIX)]
        return [ns for ns in names if not owner_alive(ns[len(PREFIX):].split("-", 1)[0])]

    deadline = time.monotonic() + grace
    while (found := left()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return found
