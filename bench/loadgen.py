"""Load generator for the forwarder benchmark: consumer and producer (the byte relay they are
compared through: bench/relay.py).

    python -m bench.loadgen producer --sock PATH [--register] [--size N] [--digest]
    python -m bench.loadgen consumer --sock PATH [--window 64] [--warmup 1] [--seconds 5] --out F

Each role is its own process on uvloop and speaks raw, pre-encoded NDN TLV: python-ndn is used
only to build the one rib/register command at setup, never on the hot path (it would be the
bottleneck). Both ends batch: every read's worth of packets is answered with one write.

Consumer: keeps `window` Interests /bench/<seq> in flight (8-byte seq, fresh nonce each), one
new Interest per Data or Nack received; an Interest unanswered for `--timeout` seconds is
counted lost and replaced, so a drop never shrinks the window. Names are unique, so no Data
can come from a cache.

Producer: answers every Interest with a Data of the same name, `--size` bytes of Content,
a DigestSha256 SignatureInfo and either a fixed 32-byte SignatureValue (default; the forwarder
does not verify) or, with --digest, the real SHA-256 computed with hashlib.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import struct
import sys
import time

PREFIX_NAME = b"\x08\x05bench"          # Name TLV-VALUE of /bench
SEQ_LEN = 8
INTEREST_LIFETIME_MS = 4000

# ---- framing ---------------------------------------------------------------------------------


def _split(buf, off: int, n: int) -> tuple[list[tuple[int, int, int]], int]:
    """Complete TLVs in buf[off:n] as (type, value offset, end), and the offset after the
    last one. Types above 252 are not expected here (Interest 0x05, Data 0x06, LpPacket 0x64)."""
    out = []
    while n - off >= 2:
        t = buf[off]
        l0 = buf[off + 1]
        if l0 < 253:
            voff = off + 2
            end = voff + l0
        elif l0 == 253:
            if n - off < 4:
                break
            voff = off + 4
            end = voff + ((buf[off + 2] << 8) | buf[off + 3])
        elif l0 == 254:
            if n - off < 6:
                break
            voff = off + 6
            end = voff + int.from_bytes(buf[off + 2:off + 6], "big")
        else:
            raise ValueError("absurd TLV length")
        if end > n:
            break
        out.append((t, voff, end))
        off = end
    return out, off


def _tl(buf, off: int) -> tuple[int, int, int]:
    """(type, value offset, end) of the TLV at off (1- or 3-byte lengths, 1-byte types)."""
    t = buf[off]
    l0 = buf[off + 1]
    if l0 < 253:
        return t, off + 2, off + 2 + l0
    if l0 == 253:
        return t, off + 4, off + 4 + ((buf[off + 2] << 8) | buf[off + 3])
    return t, off + 6, off + 6 + int.from_bytes(buf[off + 2:off + 6], "big")


def _tl_any(buf, off: int) -> tuple[int, int, int]:
    """Like _tl, for any TLV-TYPE size (NDNLPv2 headers such as Nack are 3-byte types)."""
    t = buf[off]
    if t == 253:
        t = (buf[off + 1] << 8) | buf[off + 2]
        off += 2
    elif t > 253:
        raise ValueError("TLV-TYPE beyond 16 bits not expected")
    return t, *_tl(buf, off)[1:]


def _varnum(n: int) -> bytes:
    if n < 253:
        return bytes((n,))
    if n <= 0xFFFF:
        return b"\xfd" + n.to_bytes(2, "big")
    return b"\xfe" + n.to_bytes(4, "big")


def _tlv(t: int, v: bytes) -> bytes:
    return _varnum(t) + _varnum(len(v)) + v


class Framed(asyncio.BufferedProtocol):
    """Reads straight into one preallocated buffer (no per-read bytes object, no copy into an
    accumulator) and hands the complete TLVs of each read to `on_frames` in one batch."""

    transport: asyncio.Transport
    BUF_SIZE = 1 << 20
    MIN_FREE = 64 << 10

    def __init__(self) -> None:
        self._buf = bytearray(self.BUF_SIZE)
        self._view = memoryview(self._buf)
        self._start = 0                 # first unconsumed byte
        self._end = 0                   # end of received bytes

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.BUF_SIZE - self._end < self.MIN_FREE:
            keep = self._end - self._start      # a partial packet: < 9 KB
            self._buf[:keep] = self._buf[self._start:self._end]
            self._start, self._end = 0, keep
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes
        frames, self._start = _split(self._buf, self._start, self._end)
        if self._start == self._end:
            self._start = self._end = 0
        if frames:
            self.on_frames(self._buf, frames)

    def on_frames(self, buf, frames) -> None:
        raise NotImplementedError

    def connection_lost(self, exc) -> None:
        self.lost()

    def lost(self) -> None:
        pass


# ---- consumer --------------------------------------------------------------------------------

def _proc_cpu(pid: int) -> float | None:
    """User+system CPU seconds of a process (from /proc), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class Consumer(Framed):
    def __init__(self, window: int, timeout: float, done: asyncio.Future,
                 seq_type: int = 0x08) -> None:
        super().__init__()
        self.window = window
        self.timeout = timeout
        self.done = done
        self.next_seq = 0
        self.outstanding: dict[int, float] = {}     # seq -> time sent (batch clock)
        self.received = 0                           # Data
        self.data_bytes = 0
        self.nacks = 0
        self.lost_count = 0
        self.unexpected = 0
        self.other = 0
        self._salt = random.getrandbits(32)
        # Interest = 05 L 07 NL <prefix> 08 08 <seq> 0A 04 <nonce> 0C 02 <lifetime>
        name_len = len(PREFIX_NAME) + 2 + SEQ_LEN
        value_len = 2 + name_len + 6 + 4
        self._head = bytes((0x05, value_len, 0x07, name_len)) + PREFIX_NAME + bytes((seq_type, SEQ_LEN))
        self._mid = b"\x0a\x04"
        self._tail = b"\x0c\x02" + INTEREST_LIFETIME_MS.to_bytes(2, "big")
        self._pack = struct.Struct(">QI").pack
        # where the seq sits in an echoed Data name: last SEQ_LEN bytes of the Name value

    def _interests(self, count: int, now: float) -> bytes:
        head, mid, tail, pack, salt = self._head, self._mid, self._tail, self._pack, self._salt
        seq = self.next_seq
        out = self.outstanding
        parts = []
        for _ in range(count):
            sn = pack(seq, (salt + seq) & 0xFFFFFFFF)
            parts.append(head + sn[:8] + mid + sn[8:] + tail)
            out[seq] = now
            seq += 1
        self.next_seq = seq
        return b"".join(parts)

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.transport.write(self._interests(self.window, time.monotonic()))
        asyncio.get_running_loop().call_later(self.timeout / 4, self._check_lost)

    def on_frames(self, buf, frames) -> None:
        out = self.outstanding
        pop = out.pop
        answered = 0
        for t, voff, end in frames:
            if t == 0x06:
                nt, noff, nend = _tl(buf, voff)
                seq = int.from_bytes(buf[nend - SEQ_LEN:nend], "big")
                if pop(seq, None) is None:
                    self.unexpected += 1
                    continue
                self.received += 1
                self.data_bytes += end - voff
                answered += 1
            elif t == 0x64:
                # an LpPacket toward the consumer: a Nack (or a tokened Data, which we never ask)
                nack_seq = self._lp_seq(buf, voff, end)
                if nack_seq is not None and pop(nack_seq, None) is not None:
                    self.nacks += 1
                    answered += 1
                else:
                    self.other += 1
            else:
                self.other += 1
        if answered:
            self.transport.write(self._interests(answered, time.monotonic()))

    def _lp_seq(self, buf, off: int, end: int) -> int | None:
        while off < end:
            t, voff, off2 = _tl_any(buf, off)
            if t == 0x50:                       # Fragment: the Nacked Interest
                _, ioff, _ = _tl(buf, voff)
                _, noff, nend = _tl(buf, ioff)
                return int.from_bytes(buf[nend - SEQ_LEN:nend], "big")
            off = off2
        return None

    def _check_lost(self) -> None:
        now = time.monotonic()
        out = self.outstanding
        old = [s for s, t in out.items() if now - t > self.timeout]
        for s in old:
            del out[s]
        if old:
            self.lost_count += len(old)
            self.transport.write(self._interests(len(old), now))
        asyncio.get_running_loop().call_later(self.timeout / 4, self._check_lost)

    def lost(self) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError("consumer connection lost"))

    def snapshot(self) -> dict:
        return {"t": time.monotonic(), "data": self.received, "bytes": self.data_bytes,
                "nacks": self.nacks, "lost": self.lost_count, "unexpected": self.unexpected,
                "other": self.other, "cpu": time.process_time()}


async def run_consumer(args) -> int:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    _, proto = await loop.create_unix_connection(
        lambda: Consumer(args.window, args.timeout, done, args.seq_type), args.sock)
    watch = [int(p) for p in args.watch_pids.split(",") if p] if args.watch_pids else []

    async def phase(seconds: float):
        w = asyncio.ensure_future(asyncio.sleep(seconds))
        await asyncio.wait([w, done], return_when=asyncio.FIRST_COMPLETED)
        if done.done():
            done.result()                      # raises the connection error
        return proto.snapshot(), {p: _proc_cpu(p) for p in watch}

    await phase(args.warmup)
    a, cpu_a = await phase(0)
    b, cpu_b = await phase(args.seconds)
    dt = b["t"] - a["t"]
    result = {
        "seconds": round(dt, 4),
        "exchanges": b["data"] - a["data"],
        "per_s": (b["data"] - a["data"]) / dt,
        "data_bytes_per_s": (b["bytes"] - a["bytes"]) / dt,
        "nacks": b["nacks"] - a["nacks"],
        "lost": b["lost"] - a["lost"],
        "unexpected": b["unexpected"] - a["unexpected"],
        "other": b["other"] - a["other"],
        "window": args.window,
        "cpu": {"consumer": (b["cpu"] - a["cpu"]) / dt},
    }
    for p in watch:
        if cpu_a[p] is not None and cpu_b[p] is not None:
            result["cpu"][str(p)] = (cpu_b[p] - cpu_a[p]) / dt
    line = json.dumps(result)
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            f.write(line + "\n")
        os.replace(args.out + ".tmp", args.out)
    print(line, flush=True)
    proto.transport.close()
    return 0


# ---- producer --------------------------------------------------------------------------------

class Producer(Framed):
    def __init__(self, size: int, digest: bool, lost: asyncio.Future) -> None:
        super().__init__()
        self.lost_future = lost
        self.digest = digest
        self.served = 0
        self.reply_waiter: asyncio.Future | None = None
        content = _tlv(0x15, (bytes(range(256)) * (size // 256 + 1))[:size])
        self._sig_info = b"\x16\x03\x1b\x01\x00"        # SignatureType DigestSha256
        self._signed_tail = content + self._sig_info
        self._fixed_sig = b"\x17\x20" + hashlib.sha256(b"ndnps bench").digest()
        self._tail = self._signed_tail + self._fixed_sig
        self._value_rest = len(self._signed_tail) + 34      # Data TLV-VALUE minus the Name

    def on_frames(self, buf, frames) -> None:
        parts: list[bytes] = []
        append = parts.append
        for t, voff, end in frames:
            if t == 0x64:                       # LpPacket: take the Fragment
                off = voff
                frag = None
                while off < end:
                    ft, fv, fe = _tl_any(buf, off)
                    if ft == 0x50:
                        frag = (fv, fe)
                    elif ft == 0x0320:          # a Nack toward the producer: ignore it
                        frag = None
                        break
                    off = fe
                if frag is None:
                    continue
                voff = frag[0]
                t, voff, end = _tl(buf, voff)
            if t == 0x06:
                if self.reply_waiter is not None and not self.reply_waiter.done():
                    self.reply_waiter.set_result(bytes(buf[voff - 4 if end - voff > 252 else voff - 2:end]))
                continue
            if t != 0x05:
                continue
            _, noff, nend = _tl(buf, voff)
            name_tlv = bytes(buf[voff:nend])
            n = len(name_tlv) + self._value_rest
            head = (b"\x06\xfd" + n.to_bytes(2, "big") if n >= 253 else bytes((6, n))) + name_tlv
            if self.digest:
                h = hashlib.sha256(name_tlv)
                h.update(self._signed_tail)
                append(head)
                append(self._signed_tail)
                append(b"\x17\x20" + h.digest())
            else:
                append(head)
                append(self._tail)          # content, SignatureInfo, fixed SignatureValue
        if parts:
            self.served += len(parts) // (3 if self.digest else 2)
            # writelines: one writev, the 8 KB tails are not copied in user space
            self.transport.writelines(parts)

    def lost(self) -> None:
        if not self.lost_future.done():
            self.lost_future.set_result(None)


async def _register(proto: Producer, prefix: str) -> None:
    from ndn.app_support.nfd_mgmt import make_command_v2, parse_response
    from ndn.encoding import InterestParam, make_interest, parse_data
    from ndn.security import DigestSha256Signer

    name = make_command_v2("rib", "register", name=prefix)
    wire = make_interest(name, InterestParam(lifetime=4000), app_param=b"",
                         signer=DigestSha256Signer(for_interest=True))
    proto.reply_waiter = asyncio.get_running_loop().create_future()
    proto.transport.write(bytes(wire))
    reply = await asyncio.wait_for(proto.reply_waiter, 10)
    proto.reply_waiter = None
    _, _, content, _ = parse_data(reply)
    resp = parse_response(bytes(content))
    if resp["status_code"] != 200:
        raise RuntimeError(f"register {prefix} failed: {resp['status_code']} {resp['status_text']}")


async def run_producer(args) -> int:
    loop = asyncio.get_running_loop()
    lost = loop.create_future()
    _, proto = await loop.create_unix_connection(
        lambda: Producer(args.size, args.digest, lost), args.sock)
    if args.register:
        await _register(proto, "/bench")
    print("READY", flush=True)
    await lost
    return 0


# ---- main ------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.loadgen")
    sub = p.add_subparsers(dest="role", required=True)
    c = sub.add_parser("consumer")
    c.add_argument("--sock", required=True)
    c.add_argument("--window", type=int, default=64)
    c.add_argument("--warmup", type=float, default=1.0)
    c.add_argument("--seconds", type=float, default=5.0)
    c.add_argument("--timeout", type=float, default=1.0,
                   help="seconds after which an unanswered Interest is replaced")
    c.add_argument("--watch-pids", default="", help="comma-separated pids whose CPU to report")
    c.add_argument("--seq-type", type=int, default=0x08,
                   help="TLV-TYPE of the seq component: 8 generic (default), 50 segment")
    c.add_argument("--out", default="")
    pr = sub.add_parser("producer")
    pr.add_argument("--sock", required=True)
    pr.add_argument("--size", type=int, default=8000, help="Content bytes per Data")
    pr.add_argument("--digest", action="store_true", help="compute the real SHA-256 signature")
    pr.add_argument("--register", action="store_true", help="rib/register /bench first")
    args = p.parse_args(argv)
    import uvloop
    fn = {"consumer": run_consumer, "producer": run_producer}[args.role]
    return uvloop.run(fn(args))


if __name__ == "__main__":
    sys.exit(main())
