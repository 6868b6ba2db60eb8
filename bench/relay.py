"""The trivial byte relay of the forwarder benchmark: listens on two unix sockets (the
consumer's and the producer's, bench/loadgen.py) and copies bytes from each side to the other,
with transport flow control — the Python I/O ceiling of this machine, on uvloop.

    python -m bench.relay --consumer-sock A --producer-sock B --ready FILE
"""
from __future__ import annotations

import argparse
import asyncio
import functools
import os
import signal
import sys


class RelaySide(asyncio.Protocol):
    """One end of the relay; the latest connection on a socket is that side's peer."""

    transport: asyncio.Transport        # set in connection_made, before it is anyone's peer

    def __init__(self, relay: "Relay", side: str) -> None:
        self.relay = relay
        self.side = side
        self.pending: list[bytes] = []

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.relay.sides[self.side] = self
        other = self.relay.peer(self.side)
        if other is not None and other.pending:
            transport.write(b"".join(other.pending))
            other.pending.clear()

    def data_received(self, data: bytes) -> None:
        other = self.relay.peer(self.side)
        if other is None:
            self.pending.append(data)
        else:
            other.transport.write(data)

    def pause_writing(self) -> None:
        other = self.relay.peer(self.side)
        if other is not None:
            other.transport.pause_reading()

    def resume_writing(self) -> None:
        other = self.relay.peer(self.side)
        if other is not None:
            other.transport.resume_reading()

    def connection_lost(self, exc) -> None:
        if self.relay.sides.get(self.side) is self:
            del self.relay.sides[self.side]


class Relay:
    def __init__(self) -> None:
        self.sides: dict[str, RelaySide] = {}

    def peer(self, side: str) -> RelaySide | None:
        return self.sides.get("producer" if side == "consumer" else "consumer")


async def run_relay(args) -> int:
    loop = asyncio.get_running_loop()
    relay = Relay()
    servers = []
    for side, path in (("consumer", args.consumer_sock), ("producer", args.producer_sock)):
        if os.path.exists(path):
            os.unlink(path)
        factory = functools.partial(RelaySide, relay, side)
        servers.append(await loop.create_unix_server(factory, path))
    with open(args.ready, "w") as f:
        f.write("ready\n")
    stop = loop.create_future()

    def on_signal() -> None:
        if not stop.done():
            stop.set_result(None)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    await stop
    for s in servers:
        s.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.relay")
    p.add_argument("--consumer-sock", required=True)
    p.add_argument("--producer-sock", required=True)
    p.add_argument("--ready", required=True, help="file created once both sockets listen")
    args = p.parse_args(argv)
    import uvloop
    return uvloop.run(run_relay(args))


if __name__ == "__main__":
    sys.exit(main())
