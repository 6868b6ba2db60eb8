"""Exit codes of ndnps's programs (the apps and the scenario runner): the contract between a
program and whoever runs it — a shell, a test, or the runner, which tells a training that
cannot go on (EXIT_JOB_FAILED) from a process that died."""
from __future__ import annotations

import signal

EXIT_OK = 0
EXIT_ERROR = 1            # connection lost, unexpected error
EXIT_USAGE = 2            # bad configuration or flags
EXIT_JOB_FAILED = 3       # the training cannot go on (too few workers, PS silent, ...)
EXIT_SIGNAL = 128 + signal.SIGTERM


def describe(code: int | None) -> str:
    """`code 3 (the training cannot go on)`, `SIGKILL`: how a process ended, for people."""
    if code is None:
        return "running"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    meaning = {EXIT_OK: "done", EXIT_ERROR: "error", EXIT_USAGE: "bad configuration",
               EXIT_JOB_FAILED: "the training cannot go on",
               EXIT_SIGNAL: "stopped by SIGTERM"}.get(code)
    return f"code {code}" + (f" ({meaning})" if meaning else "")
