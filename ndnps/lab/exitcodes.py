"""Exit codes of ndnps's programs (the apps and the scenario runner): the contract between a
program and whoever runs it — a shell, a test, or the runner, which tells a training that
cannot go on (EXIT_JOB_FAILED) from a process that died; the runner's failures, which carry
one."""
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


class RunFailed(RuntimeError):
    """The runner's run failed (a child's exit, a timeout, a bad set-up)."""
    exit_code: int | None = None        # a child's own code, when its exit failed the run


class JobStopped(RunFailed):
    """A job said its training cannot go on (an app exited 3): the runner exits 3 too."""
    exit_code = EXIT_JOB_FAILED


def failed_run_exit(e: Exception) -> int:
    """The runner's exit code for a failed run: the code of the child whose own exit ended it
    when that says why (3: the training cannot go on, 2: bad configuration), else 1 (a child
    killed or in error, a timeout, the runner's own failure)."""
    code = getattr(e, "exit_code", None)
    return code if code in (EXIT_USAGE, EXIT_JOB_FAILED) else EXIT_ERROR
