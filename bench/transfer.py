"""Raw transfer time: "one model's transfer time over the same sockets" in the iteration
benchmark — N bytes sent from this process to a sink process over a unix stream socket or TCP
loopback, in the TCP PS's frames (bench/tcp_ps.py), and back a 1-byte acknowledgement (median
of repetitions). The sockets alone: no NDN, no training.

    python -m bench.transfer measure --bytes 400000 [--kind unix|tcp]
    python -m bench.transfer sink --ready FILE [--unix PATH]     (the other end: measure starts it)
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, env
from bench.tcp_ps import FRAME


def sink_main(args) -> int:
    """Accept one connection; for each frame received whole, answer one byte."""
    if args.unix:
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(args.unix)
    else:
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    Path(args.ready).write_text(args.unix or str(srv.getsockname()[1]))
    conn, _ = srv.accept()
    if not args.unix:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    while True:
        head = conn.recv(FRAME.size, socket.MSG_WAITALL)
        if len(head) < FRAME.size:
            return 0
        (left,) = FRAME.unpack(head)
        while left:
            n = conn.recv_into(view, min(left, len(buf)))
            if not n:
                return 0
            left -= n
        conn.sendall(b"\x01")


def transfer_time(nbytes: int, kind: str = "unix", reps: int = 30) -> dict:
    """Median seconds to send `nbytes` to another process and get its 1-byte ack."""
    tmp = Path(tempfile.mkdtemp(prefix="xfer-"))
    ready = tmp / "ready"
    argv = [sys.executable, "-m", "bench.transfer", "sink", "--ready", str(ready)]
    if kind == "unix":
        argv += ["--unix", str(tmp / "s.sock")]
    sink = subprocess.Popen(argv, cwd=str(ROOT), env={**os.environ, **env()})
    try:
        deadline = time.monotonic() + 30
        while not (ready.exists() and ready.read_text()):
            if sink.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("transfer sink did not start")
            time.sleep(0.02)
        if kind == "unix":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(ready.read_text())
        else:
            s = socket.create_connection(("127.0.0.1", int(ready.read_text())))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        payload = FRAME.pack(nbytes) + os.urandom(nbytes)
        times = []
        for i in range(reps + 3):
            t0 = time.perf_counter()
            s.sendall(payload)
            s.recv(1)
            if i >= 3:
                times.append(time.perf_counter() - t0)
        s.close()
        return {"kind": kind, "bytes": nbytes, "seconds": statistics.median(times),
                "min": min(times), "reps": reps}
    finally:
        sink.kill()
        sink.wait()
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.transfer", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sm = sub.add_parser("measure", help="raw transfer time of --bytes")
    sm.add_argument("--bytes", type=int, required=True)
    sm.add_argument("--kind", choices=["unix", "tcp"], default="unix")
    ss = sub.add_parser("sink")
    ss.add_argument("--ready", required=True)
    ss.add_argument("--unix")
    args = p.parse_args(argv)
    if args.cmd == "sink":
        return sink_main(args)
    print(json.dumps(transfer_time(args.bytes, args.kind)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
