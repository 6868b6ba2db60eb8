"""What a run leaves in the kernel and the temp dir (network namespaces, short socket
directories) goes when the run goes, however it goes.

The runner removes them itself on success, error and Ctrl-C. Killed outright (SIGKILL, the OOM
killer) it cannot, so before it makes any it starts a reaper: `python -m ndnps.lab.reaper TAG`,
in a session of its own (a kill of the runner's process group does not reach it), which waits
for the process TAG names (`process.owner_tag`) to end — on a pidfd, so it takes no CPU — and
then removes everything named after an owner that no longer runs. Things are named after their
owner precisely so that this, and the next run's own sweep, can prove them a dead run's.
"""
from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .netns import remove_stale
from .process import owner_alive

SOCKET_DIR_PREFIX = "ndnps-sock-"
POLL = 1.0                   # s: where pidfd_open is missing (Linux < 5.3), how often to look


def remove_stale_socket_dirs() -> list[Path]:
    """Short socket directories (`ndnps-sock-<owner tag>-*` in the temp dir) of runs that no
    longer run."""
    stale = []
    for d in Path(tempfile.gettempdir()).glob(f"{SOCKET_DIR_PREFIX}*"):
        tag = d.name[len(SOCKET_DIR_PREFIX):].rsplit("-", 1)[0]
        if d.is_dir() and "." in tag and not owner_alive(tag):
            shutil.rmtree(d, ignore_errors=True)
            stale.append(d)
    return stale


def start(owner: str) -> subprocess.Popen:
    """A reaper for the process `owner` (an owner_tag), detached from it."""
    return subprocess.Popen([sys.executable, "-m", "ndnps.lab.reaper", owner],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def wait_for_end(owner: str) -> None:
    """Return once the process `owner` names has ended."""
    pid = int(owner.partition(".")[0])
    try:
        fd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        fd = None
    try:
        # opened first, then checked: a pid reused before the open fails the check
        if fd is not None and owner_alive(owner):
            select.select([fd], [], [])          # readable once it has exited
        while fd is None and owner_alive(owner):
            time.sleep(POLL)
    finally:
        if fd is not None:
            os.close(fd)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or "." not in args[0]:
        print("usage: python -m ndnps.lab.reaper OWNER_TAG", file=sys.stderr)
        return 2
    wait_for_end(args[0])
    remove_stale()
    remove_stale_socket_dirs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
