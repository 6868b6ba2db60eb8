"""`python -m forwarder status`: print a running forwarder's faces, FIB, persistent PIT and
counters (what `nfdc status` shows for NFD)."""
from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

from ndn.encoding import Component, InterestParam, Name, make_interest, parse_data

from ndnps.ndn.tlv import MAX_PACKET_SIZE, outer_length


def transport_address(transport: str) -> tuple[socket.AddressFamily, str | tuple[str, int]]:
    """The socket family and address of unix:///path or tcp://host:port; ValueError else."""
    try:
        parts = urlsplit(transport)
        port = parts.port
    except ValueError:                  # a port out of range or not a number
        pass
    else:
        if parts.scheme == "unix" and parts.path:
            return socket.AF_UNIX, parts.path
        if parts.scheme in ("tcp", "tcp4") and port != 0:
            return socket.AF_INET, (parts.hostname or "127.0.0.1", port or 6363)
    raise ValueError(f"unsupported transport {transport!r} (unix:///path or tcp://host:port)")


def _connect(transport: str, timeout: float) -> socket.socket:
    family, address = transport_address(transport)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(address)
    except BaseException:
        sock.close()
        raise
    return sock


def _read_packet(sock: socket.socket, buf: bytearray) -> bytes:
    while True:
        hdr = outer_length(buf, 0)
        if hdr is not None and len(buf) >= hdr[0] + hdr[1]:
            total = hdr[0] + hdr[1]
            pkt = bytes(buf[:total])
            del buf[:total]
            return pkt
        chunk = sock.recv(MAX_PACKET_SIZE * 2)
        if not chunk:
            raise ConnectionError("forwarder closed the connection")
        buf += chunk


def fetch_dataset(transport: str, path: str, timeout: float = 3.0) -> bytes:
    """Fetch a whole segmented management dataset, e.g. path='/localhost/nfd/faces/list'."""
    sock = _connect(transport, timeout)
    buf = bytearray()
    try:
        name = Name.from_str(path)
        sock.sendall(make_interest(name, InterestParam(can_be_prefix=True, must_be_fresh=True,
                                                       lifetime=int(timeout * 1000))))
        parts = []
        while True:
            pkt = _read_packet(sock, buf)
            if pkt[0] != 0x06:
                raise ConnectionError(f"no answer for {path} (got packet type 0x{pkt[0]:x})")
            data_name, meta, content, _ = parse_data(pkt)
            parts.append(bytes(content or b""))
            seg = Component.to_number(data_name[-1])
            last = Component.to_number(meta.final_block_id) if meta.final_block_id else seg
            if seg >= last:
                return b"".join(parts)
            sock.sendall(make_interest(data_name[:-1] + [Component.from_segment(seg + 1)],
                                       InterestParam(lifetime=int(timeout * 1000))))
    finally:
        sock.close()


def command(transport: str, name: str | list, timeout: float = 3.0,
            tries: int = 3) -> tuple[int, str]:
    """One management command (an unsigned command Interest: our forwarder takes them from
    local faces), asked again when unanswered: (status code, status text)."""
    from ndn.app_support.nfd_mgmt import parse_response
    for attempt in range(tries):
        sock = _connect(transport, timeout)
        try:
            sock.sendall(make_interest(Name.normalize(name),
                                       InterestParam(must_be_fresh=True,
                                                     lifetime=int(timeout * 1000))))
            pkt = _read_packet(sock, bytearray())
        except TimeoutError:
            if attempt + 1 == tries:
                raise
            continue
        finally:
            sock.close()
        if pkt[0] != 0x06:
            raise ConnectionError(f"no answer to the command (got packet type 0x{pkt[0]:x})")
        _, _, content, _ = parse_data(pkt)
        resp = parse_response(bytes(content or b""))
        return int(resp["status_code"]), str(resp["status_text"])
    raise ValueError("tries must be at least 1")


def fetch_status(transport: str, timeout: float = 3.0, tries: int = 1) -> dict:
    """The forwarder's ndnps/status; asked again up to `tries` times when an Interest or a
    segment goes unanswered for `timeout` (a face with emulated loss loses them too)."""
    for attempt in range(tries):
        try:
            return json.loads(fetch_dataset(transport, "/localhost/nfd/ndnps/status", timeout))
        except TimeoutError:
            if attempt + 1 == tries:
                raise
    raise ValueError("tries must be at least 1")


def print_status(status: dict) -> None:
    c = status["counters"]
    t = status["tables"]
    print(f"tables: fib={t['fib']} pit={t['pit']} cs={t['cs']} ({t['cs_bytes']} B) "
          f"dead-nonces={t['dead_nonces']} persistent={t['ppit']}")
    print(f"counters: in I/D/N={c['in_interests']}/{c['in_data']}/{c['in_nacks']} "
          f"out I/D/N={c['out_interests']}/{c['out_data']}/{c['out_nacks']} "
          f"satisfied={c['satisfied']} unsatisfied={c['unsatisfied']} cs-hits={c['cs_hits']} "
          f"pushes in/out={c['pushes_in']}/{c['pushes_out']} "
          f"udp-faces evicted/rejected={c.get('udp_faces_evicted', 0)}/"
          f"{c.get('udp_faces_rejected', 0)}")
    print("faces:")
    for f in status["faces"]:
        k = f["counters"]
        drops = ", ".join(f"{r}={n}" for r, n in sorted(k["drops"].items())) or "-"
        print(f"  {f['id']:>5} {f['remote']:<28} {f['scope']:<9} "
              f"in I/D/N={k['in_interests']}/{k['in_data']}/{k['in_nacks']} "
              f"out I/D/N={k['out_interests']}/{k['out_data']}/{k['out_nacks']} "
              f"bytes in/out={k['in_bytes']}/{k['out_bytes']} drops: {drops}")
    print("fib:")
    for e in status["fib"]:
        hops = " ".join(f"face={h['face']}(cost={h['cost']})" for h in e["nexthops"])
        print(f"  {e['prefix']} {hops}")
    print("persistent pit:")
    for e in status["ppit"]:
        faces = " ".join(f"face={f}({ttl:.1f}s)" for f, ttl in e["faces"].items())
        print(f"  {e['prefix']} {faces}")
    agg = status.get("aggregation")
    if agg:
        a = agg["counters"]
        print(f"aggregation: sums {a['answered']} of {a['interests']} asked, collisions "
              f"{a['collisions']}, rejected {a['rejected']}, sub-group fallbacks "
              f"{a['fallbacks']}, abandoned {a['abandoned']}, member Interests "
              f"{a['member_interests']}, late {a['late']}, overlaps {a.get('overlaps', 0)}, "
              f"oversize {a.get('oversize', 0)}, unauthorised plans "
              f"{a.get('unauthorised', 0)}, stale {a.get('stale', 0)}")
        pool = agg.get("pool")
        if pool:                                # (an older forwarder reports none)
            print(f"  pool: {pool['held']}/{pool['size']} slots held, busy "
                  f"{pool['busy_seconds']:.1f} s, claimed {pool['claimed']}, expired "
                  f"{pool['expired']}, dropped {pool['dropped']}")
        for t in agg["trainings"]:
            extra = (f", range [{t['first']}, {t['first'] + t['slots']}), busy "
                     f"{t['busy_seconds']:.1f} s, claimed {t['claimed']}, collisions "
                     f"{t['collisions']}, overlaps {t['overlaps']}" if "first" in t else "")
            print(f"  training {t['training']} as {t['node']}: "
                  f"{t['held']}/{t['slots']} slots held{extra}")
        for e in agg.get("overlap_log", [])[-3:]:
            print(f"  overlap at {e['t']:.3f}: {e['training']} v{e['version']} while "
                  f"{e['other']} v{e['other_version']} held slots")
