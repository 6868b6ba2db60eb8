"""Per-packet cost of the apps' hot paths (not a registered benchmark): python-ndn's generic
TLV model against a fixed-shape encoder/decoder of the same bytes, in one process.

    python -m bench.micro_apps [--n 2000]

Measured, µs per packet, for one full 8000-byte segment and the training's HMAC key:

- `sign`: one gradient/push segment as apps do it (ndnps.segments.sign_segments ->
  python-ndn make_data + ndnps.security.HmacSigner) vs `template_sign` (name prefix, MetaInfo
  and SignatureInfo encoded once; per segment: the segment component, the Content TLV, one
  HMAC) — the output is checked byte-identical;
- `parse`: python-ndn parse_data + Security.verify (what App._on_data and the fetcher's
  validator do for every received Data) vs `template_parse` (walk the five top-level TLVs,
  HMAC the covered part) — the same accept/reject;
- `interest`: python-ndn make_interest for a collect Interest vs a template (prefix bytes +
  segment component + fixed nonce/lifetime tail);
- `classify`: the forwarder tracer's per-packet class (ndnps.names.classify on the raw name)
  vs the same answer memoized by the name with its last two components cut.

The template functions here are a proof of the saving, not used by the apps: the proposed
fix (README of this directory, issue 7 report) is to give ndnps.segments / the fetcher / the
tracer such a fast path.
"""
from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import sys
import time

from bench.common import ROOT  # noqa: F401 - puts the repo on sys.path


def _tl(typ: int, length: int) -> bytes:
    from forwarder.tlv import encode_varnum
    return encode_varnum(typ) + encode_varnum(length)


def timeit(fn, n: int) -> float:
    """µs per call, best of 3 batches."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for i in range(n):
            fn(i)
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.micro_apps", description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=2000)
    args = p.parse_args(argv)

    from ndn.encoding import MetaInfo, make_data, make_interest, InterestParam, parse_data
    from ndn.encoding import Component
    from forwarder.tlv import read_tl
    from ndnps import names
    from ndnps.security import Security

    key = b"micro-key"
    sec = Security(key, names.key("ps", "t1"))
    content = os.urandom(8000)
    last = 50
    meta = MetaInfo(freshness_period=10_000, final_block_id=names.final_block_id(last))

    def apps_sign(i: int) -> bytes:
        return bytes(make_data(names.distribute("ps", "t1", 7, i % 51), meta, content,
                               signer=sec.signer))

    # template: everything but the segment component, the content and the signature is fixed
    ref = apps_sign(0)
    name0 = names.distribute("ps", "t1", 7, 0)
    prefix = b"".join(bytes(c) for c in name0[:-1])
    meta_wire = bytes(_tlv_element(ref, 20))
    siginfo_wire = bytes(_tlv_element(ref, 22))
    mac = hmac.new(key, digestmod=hashlib.sha256)
    seg_comps = [bytes(Component.from_segment(s)) for s in range(51)]

    def template_sign(i: int) -> bytes:
        seg = seg_comps[i % 51]
        name = prefix + seg
        covered = b"".join((_tl(7, len(name)), name, meta_wire, _tl(21, len(content)), content,
                            siginfo_wire))
        h = mac.copy()
        h.update(covered)
        body = covered + b"\x17\x20" + h.digest()
        return _tl(6, len(body)) + body

    assert template_sign(0) == ref and template_sign(7) == apps_sign(7), "template differs"

    wires = [apps_sign(i) for i in range(51)]

    def apps_parse(i: int) -> bool:
        name, meta_info, cont, sig = parse_data(wires[i % 51], with_tl=True)
        return sec.verify(sig)

    def template_parse(i: int) -> bool:
        w = wires[i % 51]
        _, pos, end = read_tl(w, 0, len(w))
        start = pos
        cov_end = sigval = None
        parts = {}
        while pos < end:
            t, vpos, vend = read_tl(w, pos, end)
            parts[t] = (vpos, vend)
            if t == 23:
                cov_end, sigval = pos, w[vpos:vend]
            pos = vend
        h = mac.copy()
        h.update(memoryview(w)[start:cov_end])
        return hmac.compare_digest(h.digest(), sigval)

    assert all(apps_parse(i) and template_parse(i) for i in range(51))

    cname = names.collect("w1", "ps", "t1", 7, 0)

    def apps_interest(i: int) -> bytes:
        param = InterestParam(must_be_fresh=True, lifetime=500, nonce=i & 0xFFFFFFFF)
        return bytes(make_interest(names.collect("w1", "ps", "t1", 7, i % 51), param))

    cprefix = b"".join(bytes(c) for c in cname[:-1])
    tail = b"\x12\x00" + b"\x0a\x04"            # MustBeFresh, Nonce(4)
    life = b"\x0c\x02\x01\xf4"                  # InterestLifetime 500

    def template_interest(i: int) -> bytes:
        name = cprefix + seg_comps[i % 51]
        body = _tl(7, len(name)) + name + tail + (i & 0xFFFFFFFF).to_bytes(4, "big") + life
        return _tl(5, len(body)) + body

    assert template_interest(3) == apps_interest(3), "interest template differs"

    from ndnps.names import classify
    raw_names = [_tlv_value(w, 7) for w in wires]
    cache: dict[bytes, str] = {}
    from forwarder.tlv import component_offsets

    def apps_classify(i: int) -> str:
        return classify(raw_names[i % 51], True)

    def cached_classify(i: int) -> str:
        nm = raw_names[i % 51]
        offs = component_offsets(nm)
        k = nm[:offs[-3]] if len(offs) >= 3 else nm
        c = cache.get(k)
        if c is None:
            c = cache[k] = classify(nm, True)
        return c

    n = args.n
    res = {
        "sign_us": {"apps": timeit(apps_sign, n), "template": timeit(template_sign, n)},
        "parse_verify_us": {"apps": timeit(apps_parse, n), "template": timeit(template_parse, n)},
        "interest_us": {"apps": timeit(apps_interest, n), "template": timeit(template_interest, n)},
        "classify_us": {"apps": timeit(apps_classify, n * 5), "cached": timeit(cached_classify, n * 5)},
    }
    for k, v in res.items():
        a, b = list(v.values())
        v["ratio"] = round(a / b, 1)
        for kk in list(v):
            if kk != "ratio":
                v[kk] = round(v[kk], 2)
        print(f"{k:18s} {v}", file=sys.stderr)
    print(json.dumps(res))
    return 0


def _tlv_element(wire: bytes, typ: int) -> bytes:
    from forwarder.tlv import read_tl
    _, pos, end = read_tl(wire, 0, len(wire))
    while pos < end:
        t, vpos, vend = read_tl(wire, pos, end)
        if t == typ:
            return wire[pos:vend]
        pos = vend
    raise KeyError(typ)


def _tlv_value(wire: bytes, typ: int) -> bytes:
    from forwarder.tlv import read_tl
    el = _tlv_element(wire, typ)
    _, vpos, vend = read_tl(el, 0, len(el))
    return el[vpos:vend]


if __name__ == "__main__":
    sys.exit(main())
