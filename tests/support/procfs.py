"""What is left running: the live processes whose command line names a path (a run directory),
read from /proc — a test that started a run checks that it left none."""
from __future__ import annotations

import os
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
