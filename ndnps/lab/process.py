"""Child processes for experiments and tests: start, wait until ready, stop, show log tails.

Used by the scenario runner and the integration tests alike, so both clean up the same way.
Every child dies with the process that started it, however that one dies (SIGKILL included):
the kernel sends it SIGKILL then (PR_SET_PDEATHSIG). What outlives a process in the kernel
(network namespaces, socket directories) is named after its owner (`owner_tag`), so that the
next run can prove a leftover is a dead run's and remove it (`owner_alive`).
"""
from __future__ import annotations

import ctypes
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

READY_TIMEOUT = 30.0        # s a process started has to say it is ready

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with(parent: int) -> Callable[[], None]:
    """preexec_fn of a child: SIGKILL when the thread that forked it exits (our processes
    start children from their main thread), and at once if that happened before the call."""
    prctl = _libc.prctl                     # looked up before the fork, not in the child

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)
    return preexec


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (field 3, the state, first)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after it
    return stat[stat.rindex(")") + 2:].split()


def _start_ticks(pid: int) -> str | None:
    """A process's start time (clock ticks since boot, /proc/<pid>/stat field 22): with the
    pid, it names one process for the machine's uptime (pids are reused, this pair is not)."""
    fields = _stat(pid)
    return fields[19] if fields else None


def owner_tag(pid: int | None = None) -> str:
    """`<pid>.<start ticks>` of this process (or `pid`): part of the names of what it leaves
    in the kernel, so a later run can tell whether their owner still runs."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}.{_start_ticks(pid)}"


def owner_alive(tag: str) -> bool:
    """Whether the process `tag` (from owner_tag) is still running: a zombie (dead, not yet
    reaped by its parent) is not."""
    pid, _, ticks = tag.partition(".")
    fields = _stat(int(pid)) if pid.isdigit() else None
    return fields is not None and fields[19] == ticks and fields[0] != "Z"


class ProcessFailed(RuntimeError):
    """A child exited badly or never became ready; the message carries its log tail, and
    `exit_code` the child's own code when it had exited (None: it had not)."""

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ManagedProcess:
    def __init__(self, name: str, argv: list[str], log_path: Path,
                 env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        self.started = time.monotonic()
        self.name = name
        self.argv = argv
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        full_env = dict(os.environ)
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        if env:
            full_env.update(env)
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=full_env, cwd=cwd, start_new_session=True,
                                     preexec_fn=_die_with(os.getpid()))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def fail(self, why: str) -> ProcessFailed:
        return ProcessFailed(f"{self.name} {why}; last lines of {self.log_path}:\n{self.tail()}",
                             self.proc.poll())

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise self.fail(f"did not exit within {timeout:.0f} s") from None

    def stop(self, grace: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after `grace` seconds; the whole process group goes."""
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait(5)
        self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        self.proc.wait(5)

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass


def wait_until(check, timeout: float, proc: ManagedProcess | None = None,
               what: str = "ready") -> None:
    """Poll `check()` until true; fail early with the log tail if `proc` dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if proc is not None and proc.poll() is not None:
            raise proc.fail(f"exited with code {proc.poll()} before it was {what}")
        time.sleep(0.05)
    if proc is not None:
        raise proc.fail(f"was not {what} within {timeout:.0f} s")
    raise TimeoutError(f"not {what} within {timeout:.0f} s")


def unix_socket_accepts(path: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (what binding port 0 hands out)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port free for both UDP and TCP on 127.0.0.1 at the time of the call, drawn from below
    the kernel's ephemeral range: a port picked here for a forwarder started later cannot be
    taken meanwhile by an ephemeral port (an earlier forwarder's outgoing faces, a client's
    connection), as one picked by binding port 0 could (seen in the fat-tree's 20 forwarders:
    "Address already in use")."""
    high = min(_ephemeral_low(), 65536)
    low = max(1024, min(20000, high - 4096))
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(low, high)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s, \
                    socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s2:
                s.bind(("127.0.0.1", port))
                s2.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
    raise RuntimeError(f"no free port found in [{low}, {high})")


def start_forwarder(name: str, workdir: Path, udp: int = 0, tcp: int = 0,
                    config: Path | None = None, log_level: str = "INFO",
                    extra_env: dict[str, str] | None = None,
                    ready_timeout: float = 15.0) -> tuple[ManagedProcess, str]:
    """Start `python -m ndnps.forwarder` on a unix socket in `workdir`; returns (process, socket path)
    once the socket accepts connections."""
    workdir = Path(workdir)
    sock = str(workdir / f"{name}.sock")
    argv = [sys.executable, "-m", "ndnps.forwarder", "--unix", sock, "--tcp", str(tcp),
            "--udp", str(udp), "--host", "127.0.0.1", "--log-level", log_level]
    if config is not None:
        argv += ["--config", str(config)]
    proc = ManagedProcess(name, argv, workdir / f"{name}.log", env=extra_env)
    wait_until(lambda: unix_socket_accepts(sock), ready_timeout, proc, "listening")
    return proc, sock
