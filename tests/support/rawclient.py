"""A deliberately small NDN client on a raw unix socket, for tests that must see every packet
a forwarder sends to a face (python-ndn's NDNApp drops Data it did not ask for)."""
from __future__ import annotations

import asyncio
import os

from ndn.app_support.nfd_mgmt import make_command_v2, parse_response
from ndn.encoding import (
    Component, InterestParam, MetaInfo, Name, make_data, make_interest, parse_data,
    parse_interest,
)
from ndn.security import DigestSha256Signer

from ndnps.ndn.tlv import outer_length


class RawFace:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, path: str) -> "RawFace":
        reader, writer = await asyncio.open_unix_connection(path)
        return cls(reader, writer)

    def send(self, wire: bytes) -> None:
        self.writer.write(bytes(wire))

    async def recv(self, timeout: float = 2.0) -> bytes:
        """Next whole packet (bare or LpPacket) as bytes; TimeoutError if none comes."""
        async def read():
            head = await self.reader.readexactly(2)
            while outer_length(head, 0) is None:
                head += await self.reader.readexactly(1)
            hsize, length = outer_length(head, 0)
            return head + await self.reader.readexactly(hsize + length - len(head))
        return await asyncio.wait_for(read(), timeout)

    async def recv_all(self, quiet: float = 0.5) -> list[bytes]:
        """Every packet until none arrives for `quiet` seconds."""
        out = []
        while True:
            try:
                out.append(await self.recv(quiet))
            except (TimeoutError, asyncio.TimeoutError):
                return out

    async def recv_until(self, done, timeout: float = 10.0, quiet: float = 0.3) -> list[bytes]:
        """Packets until `done(packets)` holds (or `timeout`), then any that follow within
        `quiet` seconds, so duplicates still show."""
        out: list[bytes] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not done(out) and loop.time() < deadline:
            try:
                out.append(await self.recv(max(0.01, deadline - loop.time())))
            except (TimeoutError, asyncio.TimeoutError):
                break
        return out + await self.recv_all(quiet)

    async def register(self, prefix: str) -> int:
        cmd = make_interest(make_command_v2("rib", "register", name=prefix), InterestParam(),
                            app_param=b"", signer=DigestSha256Signer(for_interest=True))
        self.send(cmd)
        _, _, content, _ = parse_data(await self.recv())
        return parse_response(content)["status_code"]

    def express(self, name, lifetime: int = 2000, can_be_prefix: bool = False,
                must_be_fresh: bool = False) -> None:
        self.send(make_interest(name, InterestParam(can_be_prefix=can_be_prefix,
                                                    must_be_fresh=must_be_fresh,
                                                    lifetime=lifetime,
                                                    nonce=int.from_bytes(os.urandom(4), "big"))))

    def put(self, name, content: bytes, freshness: int | None = None,
            final: int | None = None) -> None:
        meta = MetaInfo(freshness_period=freshness,
                        final_block_id=Component.from_segment(final) if final is not None else None)
        self.send(make_data(name, meta, content, signer=DigestSha256Signer()))

    def close(self) -> None:
        self.writer.close()


def name_of(wire: bytes) -> str:
    """Name of a bare Data or Interest, as a URI."""
    if wire[0] == 0x06:
        return Name.to_str(parse_data(wire)[0])
    return Name.to_str(parse_interest(wire)[0])


def marker(text: bytes, rest: str) -> list:
    """A name whose first component is a marker (`*insert*` ...) followed by `rest`."""
    return [Component.from_bytes(text)] + Name.from_str(rest)
