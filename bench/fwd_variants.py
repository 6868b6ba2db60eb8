"""Measure candidate optimisations end to end without editing the forwarder: each variant is
a runtime patch applied by a wrapper before `forwarder.__main__.main` runs.

    python -m bench.fwd_variants compare [--variants baseline,batch,gc,batch+gc] [--size 8000]
                                         [--seconds 4] [--rounds 3]
    python -m bench.fwd_variants run VARIANT [forwarder flags...]     (the wrapper itself)

Variants (combine with +):
  baseline  the forwarder as committed
  batch     output coalescing: a face's sends during one read callback are queued and flushed
            with one transport.writelines() (one writev) when the callback returns, instead of
            one transport.write() (one send syscall) per packet
  gc        gc.freeze() once the forwarder is up, and gen-0 threshold 50000 (default 700), so
            the long-lived CS/PIT/DNL objects are not rescanned by every collection
  dnl       NFD's Dead Nonce List rule: a satisfied, non-MustBeFresh entry is not added
  cs        Content Store sorted index maintained lazily (only CanBePrefix lookups need it)
  decode    inlined TLV parsing in decode_interest / decode_data, falling back to the
            original on anything unusual
  io        framing loop parses TLV headers inline; daemon.receive dispatches directly

`compare` runs relay, then each variant, per round (alternating, like bench.forwarder), and
prints the medians and each variant's ratio to the relay and to the baseline.
"""
from __future__ import annotations

import argparse
import gc
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# ---- patches ---------------------------------------------------------------------------------

def patch_batch() -> None:
    import asyncio

    from forwarder import daemon
    from forwarder.faces import stream
    from forwarder.faces.base import QUEUE_LIMIT_BYTES

    StreamFace = stream.StreamFace
    dirty: list = []                      # faces with queued output, flushed after each read
    state = {"in_read": False, "scheduled": False}
    orig_received = StreamFace.data_received
    orig_dispatch = daemon.ForwarderDaemon.dispatch

    def _write(self, wire: bytes) -> None:
        t = self.transport
        if t is None or self._closed:
            return
        q = self.__dict__.get("_wq")
        if q is None:
            q = self._wq = []
            self._wq_bytes = 0
        if self._wq_bytes + len(wire) + t.get_write_buffer_size() > QUEUE_LIMIT_BYTES:
            self.info.drop("queue_full")
            return
        if not q:
            dirty.append(self)
        q.append(wire)
        self._wq_bytes += len(wire)

    def flush() -> None:
        state["scheduled"] = False
        while dirty:
            face = dirty.pop()
            q = face._wq
            if q and not face._closed and face.transport is not None:
                face.transport.writelines(q)
            face._wq = []
            face._wq_bytes = 0

    def data_received(self, data: bytes) -> None:
        state["in_read"] = True
        try:
            orig_received(self, data)
        finally:
            state["in_read"] = False
            flush()

    def dispatch(self, actions: list) -> None:
        orig_dispatch(self, actions)
        # sends outside a read callback (management replies, timers): flush them soon
        if dirty and not state["in_read"] and not state["scheduled"]:
            state["scheduled"] = True
            asyncio.get_running_loop().call_soon(flush)

    StreamFace._write = _write
    StreamFace.data_received = data_received
    daemon.ForwarderDaemon.dispatch = dispatch


def patch_dnl() -> None:
    """NFD's rule (Forwarder::insertDeadNonceList): a satisfied entry goes to the Dead Nonce
    List only if its Interest was MustBeFresh (NFD: and the Data's FreshnessPeriod is shorter
    than the list's lifetime); otherwise the CS answers a looping Interest."""
    import inspect

    from forwarder import pipelines
    if "data" in inspect.signature(pipelines.Forwarder._finalize).parameters:
        return                                # the forwarder already follows NFD's rule

    def _finalize(self, entry, satisfied: bool) -> None:
        if entry.erased:
            return
        if not satisfied or entry.must_be_fresh:
            self._remember_nonces(entry, self.clock())
        if satisfied:
            self.counters.satisfied += 1
        else:
            self.counters.unsatisfied += 1
        self.pit.erase(entry)

    pipelines.Forwarder._finalize = _finalize


def patch_cs() -> None:
    """CS with a lazily maintained sorted index: inserts and evictions only note the change;
    the SortedList is brought up to date on the next CanBePrefix lookup, and a name evicted
    before any such lookup costs nothing in the index."""
    from forwarder.tables import cs as csmod
    CS = csmod.ContentStore
    orig_init = CS.__init__
    orig_find = CS._find
    orig_erase_all = CS.erase_all

    def __init__(self, *a, **kw):
        orig_init(self, *a, **kw)
        self._add: dict[bytes, None] = {}     # inserted, not yet in _index
        self._rm: set[bytes] = set()          # evicted, still in _index

    def insert(self, data, now: float) -> None:
        if self.max_packets <= 0 or len(data.wire) > self.max_bytes:
            return
        name = data.name
        entries = self._entries
        old = entries.pop(name, None)
        if old is not None:
            self.bytes -= len(old.data.wire)
        elif name in self._rm:
            self._rm.discard(name)             # still indexed
        else:
            self._add[name] = None
        entries[name] = csmod.CsEntry(data, now + data.freshness / 1000.0)
        self.bytes += len(data.wire)
        while len(entries) > self.max_packets or self.bytes > self.max_bytes:
            self._evict_oldest()

    def _evict_oldest(self) -> None:
        name, entry = self._entries.popitem(last=False)
        if name in self._add:
            del self._add[name]
        else:
            self._rm.add(name)
        self.bytes -= len(entry.data.wire)
        self.evictions += 1

    def _find(self, interest, now: float):
        if interest.can_be_prefix and (self._add or self._rm):
            index = self._index
            for name in self._rm:
                index.remove(name)
            self._rm.clear()
            index.update(self._add)
            self._add.clear()
        return orig_find(self, interest, now)

    def erase_all(self) -> None:
        orig_erase_all(self)
        self._add.clear()
        self._rm.clear()

    CS.__init__ = __init__
    CS.insert = insert
    CS._evict_oldest = _evict_oldest
    CS._find = _find
    CS.erase_all = erase_all


def patch_decode() -> None:
    """Inline 1-byte TYPE / 1- or 3-byte LENGTH parsing in decode_interest and decode_data
    (the only forms on the hot path); anything else falls back to the original decoder, which
    also produces the errors."""
    from forwarder import packet
    orig_interest = packet.decode_interest
    orig_data = packet.decode_data
    Interest, Data = packet.Interest, packet.Data
    carried = packet._CARRIED_INTEREST_ELEMENTS
    default_lifetime = packet.DEFAULT_LIFETIME_MS
    from_bytes = int.from_bytes

    def decode_interest(w0, s0, e0, pit_token=None):
        try:
            r = _interest(w0, s0, e0, pit_token)
        except IndexError:
            r = None
        return orig_interest(w0, s0, e0, pit_token) if r is None else r

    def _interest(wire, start, end, pit_token):
        l0 = wire[start + 1]
        if wire[start] != 5 or l0 > 253:
            return None
        if l0 == 253:
            off = start + 4
            vend = off + ((wire[start + 2] << 8) | wire[start + 3])
        else:
            off = start + 2
            vend = off + l0
        if vend != end:
            return None
        if start or end != len(wire):
            wire = wire[start:end]
            off -= start
            vend -= start
        nl = wire[off + 1]
        if wire[off] != 7 or nl == 0 or nl > 252:
            return None
        off += 2
        nend = off + nl
        if nend > vend:
            return None
        name = wire[off:nend]
        cbp = mbf = False
        nonce = hop = None
        lifetime = default_lifetime
        hop_at = -1
        off = nend
        while off < vend:
            t = wire[off]
            n = wire[off + 1]
            if t > 252 or n > 252:
                return None
            voff = off + 2
            off = voff + n
            if off > vend:
                return None
            if t == 0x0A:
                if n != 4:
                    return None
                nonce = wire[voff:off]
            elif t == 0x0C:
                if n not in (1, 2, 4, 8):
                    return None
                lifetime = from_bytes(wire[voff:off], "big")
            elif t == 0x21:
                cbp = True
            elif t == 0x12:
                mbf = True
            elif t == 0x22:
                if n != 1:
                    return None
                hop = wire[voff]
                hop_at = voff
            elif t not in carried and (t < 32 or t & 1):
                return None
        return Interest(wire, name, cbp, mbf, nonce, lifetime, hop, hop_at, pit_token)

    def decode_data(w0, s0, e0, pit_token=None):
        try:
            r = _data(w0, s0, e0, pit_token)
        except IndexError:
            r = None
        return orig_data(w0, s0, e0, pit_token) if r is None else r

    def _data(wire, start, end, pit_token):
        l0 = wire[start + 1]
        if wire[start] != 6 or l0 > 253:
            return None
        if l0 == 253:
            off = start + 4
            vend = off + ((wire[start + 2] << 8) | wire[start + 3])
        else:
            off = start + 2
            vend = off + l0
        if vend != end:
            return None
        if start or end != len(wire):
            wire = wire[start:end]
            off -= start
            vend -= start
        nl = wire[off + 1]
        if wire[off] != 7 or nl > 252:
            return None
        noff = off + 2
        nend = noff + nl
        if nend > vend:
            return None
        freshness = 0
        if nend < vend and wire[nend] == 0x14:          # MetaInfo
            ml = wire[nend + 1]
            if ml > 252:
                return None
            moff = nend + 2
            mend = moff + ml
            if mend > vend:
                return None
            while moff < mend:
                t = wire[moff]
                n = wire[moff + 1]
                if t > 252 or n > 252:
                    return None
                voff = moff + 2
                moff = voff + n
                if moff > mend:
                    return None
                if t == 0x19:
                    if n not in (1, 2, 4, 8):
                        return None
                    freshness = from_bytes(wire[voff:moff], "big")
        return Data(wire, wire[noff:nend], freshness, pit_token)

    packet.decode_interest = decode_interest
    packet.decode_data = decode_data


def patch_gc() -> None:
    from forwarder import daemon
    orig_start = daemon.ForwarderDaemon.start

    async def start(self) -> None:
        await orig_start(self)
        gc.collect()
        gc.freeze()
        gc.set_threshold(50000, 10, 10)

    daemon.ForwarderDaemon.start = start


def patch_io() -> None:
    """Per-packet I/O overhead: the framing loop parses the common TLV header forms inline
    (no outer_length() call per packet), and the daemon's receive dispatches the pipeline's
    actions itself (one Python call fewer per packet)."""
    from forwarder import daemon
    from forwarder.face_table import INTERNAL_FACE
    from forwarder.faces import stream
    from forwarder.tlv import MAX_PACKET_SIZE, outer_length

    def _deliver_complete(self, data):
        off = 0
        n = len(data)
        receive = self._owner.receive
        while off < n:
            rest = n - off
            if rest >= 4 and data[off] < 253 and data[off + 1] <= 253:
                l0 = data[off + 1]
                total = 2 + l0 if l0 < 253 else 4 + ((data[off + 2] << 8) | data[off + 3])
            else:
                hdr = outer_length(data, off)
                if hdr is None:
                    break
                total = hdr[0] + hdr[1]
            if total > MAX_PACKET_SIZE:
                self.info.drop("oversize")
                self.close()
                return None
            if total > rest:
                break
            receive(self, bytes(data[off:off + total]))
            if self._closed:
                return None
            off += total
        return off

    def receive(self, face, wire: bytes) -> None:
        faces = self.faces
        for face_id, item in self.fw.on_receive(face.info.id, wire):
            if face_id == INTERNAL_FACE:
                self._spawn(self._manage(*item))
                continue
            out = faces.get(face_id)
            if out is not None:
                out.send(item)

    stream.StreamFace._deliver_complete = _deliver_complete
    daemon.ForwarderDaemon.receive = receive


PATCHES = {"baseline": lambda: None, "batch": patch_batch, "gc": patch_gc, "dnl": patch_dnl,
           "cs": patch_cs, "decode": patch_decode, "io": patch_io}


def run(variant: str, argv: list[str]) -> int:
    for part in variant.split("+"):
        PATCHES[part]()
    from forwarder.__main__ import main as fwd_main
    return fwd_main(argv)


# ---- comparison ------------------------------------------------------------------------------

def compare(args) -> int:
    from bench.forwarder import run_once
    variants = args.variants.split(",")
    for v in variants:
        for part in v.split("+"):
            if part not in PATCHES:
                raise SystemExit(f"unknown variant part {part!r}")
    workdir = Path(tempfile.mkdtemp(prefix="fwdbench-var-"))
    runs: dict[str, list[dict]] = {"relay": [], **{v: [] for v in variants}}
    try:
        for r in range(args.rounds):
            for mode in ["relay", *variants]:
                if mode == "relay":
                    res = run_once("relay", workdir / f"relay{r}", args.size, args.window,
                                   args.seconds, 1.0)
                else:
                    res = run_once("fwd", workdir / f"{mode}{r}", args.size, args.window,
                                   args.seconds, 1.0,
                                   fwd_argv=[sys.executable, "-m", "bench.fwd_variants", "run",
                                             mode])
                runs[mode].append(res)
                print(f"round {r + 1} {mode:14s} {res['per_s']:9.0f}/s  cpu {res['cpu']}",
                      file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    med = {m: statistics.median(x["per_s"] for x in rs) for m, rs in runs.items()}
    base = med.get("baseline")
    summary = {}
    for m, v in med.items():
        fwd_cpu = statistics.median(x["cpu"].get("fwd", 0) for x in runs[m]) if m != "relay" else None
        summary[m] = {"per_s": round(v, 1), "ratio_to_relay": round(v / med["relay"], 4)}
        if base and m != "relay":
            summary[m]["vs_baseline"] = round(v / base, 3)
            summary[m]["fwd_cpu"] = fwd_cpu
            summary[m]["fwd_cpu_us_per_exchange"] = round(fwd_cpu / v * 1e6, 1)
    for m, s in summary.items():
        print(f"{m:16s} {json.dumps(s)}")
    print(json.dumps({"size": args.size, "window": args.window, "medians": summary}))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:
        return run(argv[1], argv[2:])
    p = argparse.ArgumentParser(prog="python -m bench.fwd_variants")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--variants", default="baseline,batch,gc,batch+gc")
    c.add_argument("--size", type=int, default=8000)
    c.add_argument("--window", type=int, default=64)
    c.add_argument("--seconds", type=float, default=4.0)
    c.add_argument("--rounds", type=int, default=3)
    return compare(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
