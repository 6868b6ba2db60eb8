"""Micro-benchmark: CPU cost in the sender of one transport.write() per packet against one
transport.writelines() per batch, on a uvloop unix socket whose peer (a child process) reads
and discards. This is what the forwarder's StreamFace does per packet today.

    python -m bench.micro_io [--size 8066] [--batch 64] [--seconds 2]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time


async def _run(sock: socket.socket, size: int, batch: int, seconds: float, mode: str) -> float:
    loop = asyncio.get_running_loop()
    drained = asyncio.Event()

    class P(asyncio.Protocol):
        def pause_writing(self):
            drained.clear()

        def resume_writing(self):
            drained.set()

    drained.set()
    transport, _ = await loop.create_unix_connection(P, sock=sock)
    pkt = bytes(size)
    pkts = [pkt] * batch
    sent = 0
    c0 = time.process_time()
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        await drained.wait()
        if mode == "write":
            for p in pkts:
                transport.write(p)
        else:
            transport.writelines(pkts)
        sent += batch
        await asyncio.sleep(0)
    cpu = time.process_time() - c0
    transport.close()
    return cpu / sent * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.micro_io")
    ap.add_argument("--size", type=int, default=8066)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args(argv)
    import uvloop
    print(f"sender CPU µs per {args.size}-byte packet, batches of {args.batch}:")
    for mode in ("write", "writelines", "write", "writelines"):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:                                     # reader: drain and discard
            a.close()
            try:
                while b.recv(1 << 20):
                    pass
            finally:
                os._exit(0)
        b.close()
        a.setblocking(False)
        us = uvloop.run(_run(a, args.size, args.batch, args.seconds, mode))
        os.waitpid(pid, 0)
        print(f"  {us:7.2f}  {mode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
