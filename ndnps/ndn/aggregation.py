"""In-network aggregation's wire pieces (docs/aggregation.md), in the base: the forwarder and the
apps both read them.

* The **plan** an `*aggregate*` Interest carries in its ApplicationParameters: a tree of
  groups. A group names the node that sums (`at`: an aggregating forwarder's node name, which
  the Interest's ForwardingHint routes it to) and its members: workers (whose collect
  Interests `/<gpu>/<ps>/<train>/<version>/<seg>` the node expresses) and sub-groups (to which
  it expresses `*aggregate*` Interests of its own)::

      Group  = 0x80 len  At (0x81 len utf-8)  [Exact (0x89 0)]  (Worker (0x82 len utf-8) | Group)*

  Exact: the group's sum is wanted exact (ndnps.ndn.summable EXACT, int64 fixed point), not
  rounded to float32: its requester adds it to others. An aggregator sets it on the sub-plans it
  asks for; the PS never sets it (it only averages the root's sum).

* The **configuration** `/localhost/nfd/aggregators/add` installs (its ApplicationParameters):
  the training's prefix, this forwarder's node name, the training's HMAC key and key name,
  its slots (a range of the forwarder's one pool: first and count) and the slots' timeout.
* The **Interest** an aggregating node (or the PS) expresses: a signed Interest of NDN packet
  format v0.3 — name + ParametersSha256DigestComponent, MustBeFresh, ForwardingHint, Nonce,
  InterestLifetime, ApplicationParameters (the plan), InterestSignatureInfo (HMAC-SHA256,
  KeyLocator: the training's key name), InterestSignatureValue — and its check (`signed_plan`):
  an aggregator claims slots only for plans signed under the training's key.
* The **HMAC check** of a contribution and the **signature** of a sum, under the training's key
  (SignatureHmacWithSha256, as ndnps.client.security signs the training's Data).
"""
from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Final, Union

from .encoders import encode_data, encode_meta_info, encode_signature_info
from .tlv import (APP_PARAMETERS, CONTENT, DATA, FORWARDING_HINT, GENERIC_COMPONENT, INTEREST,
                  INTEREST_LIFETIME, INTEREST_SIGNATURE_INFO, INTEREST_SIGNATURE_VALUE, KEY_LOCATOR,
                  MUST_BE_FRESH, NAME, NONCE, PARAMS_DIGEST, SIGNATURE_INFO, SIGNATURE_TYPE,
                  SIGNATURE_VALUE, DecodeError, component_offsets, decode_nonneg, encode_tlv,
                  nonneg_element, read_tl, tl)

GROUP: Final = 0x80
AT: Final = 0x81
WORKER: Final = 0x82
KEY: Final = 0x83
KEY_NAME: Final = 0x84
SLOTS: Final = 0x85
TIMEOUT_MS: Final = 0x86
NODE: Final = 0x87
FIRST: Final = 0x88               # optional (absent: 0), so older encodings still decode
EXACT: Final = 0x89               # a group's flag: answer its sum exact (summable.EXACT)

HMAC_WITH_SHA256: Final = 4
# workers under one plan: a datacentre's 1,024 (a k = 16 fat-tree), each slot's bitmap as
# many (a group's direct members, at most every worker)
MAX_MEMBERS: Final = 1024
# octets of an encoded plan: the Interest that carries it has its name, hint, signature and
# HMAC besides, within NDN's 8,800-octet packet (1,024 workers of 5-octet names in 128 edge
# groups: ~7,150)
MAX_PLAN: Final = 8000
MAX_DEPTH: Final = 4
MAX_NAME: Final = 64              # octets of a node or worker name
MAX_SLOTS: Final = 1 << 20        # a forwarder's pool: every range ends within it
MAX_TIMEOUT: Final = 60.0         # s


@dataclass(frozen=True)
class Group:
    at: str
    members: tuple["Member", ...]
    exact: bool = False           # its sum answered exact (its requester adds it to others)

    def workers(self) -> tuple[str, ...]:
        """Every worker under this group, depth first, in plan order."""
        out: list[str] = []
        for m in self.members:
            out.extend(m.workers() if isinstance(m, Group) else (m,))
        return tuple(out)


Member = Union[str, Group]


def _text(value: str) -> bytes:
    raw = value.encode()
    if not 0 < len(raw) <= MAX_NAME:
        raise ValueError(f"a plan name must be 1 to {MAX_NAME} octets: {value!r}")
    return raw


def encode_plan(group: Group) -> bytes:
    workers = group.workers()
    if not 1 <= len(workers) <= MAX_MEMBERS or len(set(workers)) != len(workers):
        raise ValueError(f"a plan needs 1 to {MAX_MEMBERS} distinct workers")
    wire = _encode_group(group, 1)
    if len(wire) > MAX_PLAN:
        raise ValueError(f"a plan of {len(workers)} workers is {len(wire)} octets: more than "
                         f"the {MAX_PLAN} one Interest carries (shorter names, or fewer "
                         "workers under one plan)")
    return wire


def _encode_group(group: Group, depth: int) -> bytes:
    if depth > MAX_DEPTH:
        raise ValueError(f"a plan may nest {MAX_DEPTH} groups deep")
    if not group.members:
        raise ValueError(f"group at {group.at!r} has no members")
    parts = [encode_tlv(AT, _text(group.at))]
    if group.exact:
        parts.append(bytes((EXACT, 0)))
    for m in group.members:
        parts.append(_encode_group(m, depth + 1) if isinstance(m, Group)
                     else encode_tlv(WORKER, _text(m)))
    return encode_tlv(GROUP, b"".join(parts))


def decode_plan(buf: bytes | memoryview) -> Group:
    """The plan; DecodeError on anything malformed or out of bounds."""
    typ, voff, vend = read_tl(buf, 0, len(buf))
    if typ != GROUP or vend != len(buf):
        raise DecodeError("not a plan")
    group = _decode_group(buf, voff, vend, 1)
    workers = group.workers()
    if not 1 <= len(workers) <= MAX_MEMBERS or len(set(workers)) != len(workers):
        raise DecodeError(f"a plan needs distinct workers, at most {MAX_MEMBERS}")
    return group


def _decode_group(buf: bytes | memoryview, off: int, end: int, depth: int) -> Group:
    if depth > MAX_DEPTH:
        raise DecodeError("plan nested too deep")
    at = None
    exact = False
    members: list[Member] = []
    while off < end:
        typ, voff, vend = read_tl(buf, off, end)
        if typ == AT and at is None:
            at = _decode_text(buf[voff:vend])
        elif typ == EXACT and at is not None and not exact and not members and voff == vend:
            exact = True
        elif typ == WORKER and at is not None:
            members.append(_decode_text(buf[voff:vend]))
        elif typ == GROUP and at is not None:
            members.append(_decode_group(buf, voff, vend, depth + 1))
        else:
            raise DecodeError(f"unexpected element 0x{typ:x} in a plan")
        off = vend
    if at is None or not members:
        raise DecodeError("a group needs a node and members")
    return Group(at, tuple(members), exact)


def _decode_text(raw: bytes | memoryview) -> str:
    if not 0 < len(raw) <= MAX_NAME:
        raise DecodeError("bad name length in a plan")
    try:
        return bytes(raw).decode()
    except UnicodeDecodeError:
        raise DecodeError("a plan name is not UTF-8") from None


# ---- the configuration (management) ------------------------------------------------------------

@dataclass(frozen=True)
class AggregatorConfig:
    """A training this forwarder sums for. Its slots are the range [first, first + slots) of
    the forwarder's one pool: trainings given the same range share those slots in time,
    disjoint ranges split the pool between them (ndnps/forwarder/aggregator.py)."""
    training: bytes           # the training's name TLV-VALUE, /<ps>/<train>
    node: str                 # this forwarder's node name: plans address it by that
    key: bytes                # the training's HMAC key
    key_name: bytes           # its name TLV-VALUE (the KeyLocator of the sums it signs)
    slots: int = 1024
    timeout: float = 2.0      # s a slot waits for its contributors
    first: int = 0            # the range's first slot in the forwarder's pool

    def __post_init__(self) -> None:
        problem = self._bounds_error()
        if problem:
            raise ValueError(problem)

    def _bounds_error(self) -> str | None:
        """What is out of bounds in the numbers, or None."""
        if not 1 <= self.slots <= MAX_SLOTS:
            return f"slots must be 1 to {MAX_SLOTS}, got {self.slots}"
        if self.first < 0:
            return f"first must be >= 0, got {self.first}"
        if self.first + self.slots > MAX_SLOTS:
            return (f"the range [{self.first}, {self.first + self.slots}) passes the pool's "
                    f"{MAX_SLOTS} slots")
        if not 0 < self.timeout <= MAX_TIMEOUT:
            return f"timeout must be in (0, {MAX_TIMEOUT:g}] s, got {self.timeout}"
        return None

    def encode(self) -> bytes:
        if not self.key:
            raise ValueError("aggregation needs the training's HMAC key")
        first = nonneg_element(FIRST, self.first) if self.first else b""
        return b"".join((encode_tlv(NAME, self.training), encode_tlv(NODE, _text(self.node)),
                         encode_tlv(KEY, self.key), encode_tlv(KEY_NAME, self.key_name),
                         nonneg_element(SLOTS, self.slots),
                         nonneg_element(TIMEOUT_MS, int(round(self.timeout * 1000))), first))

    @classmethod
    def decode(cls, buf: bytes | memoryview) -> "AggregatorConfig":
        got: dict[int, bytes] = {}
        off = 0
        while off < len(buf):
            typ, voff, vend = read_tl(buf, off, len(buf))
            got[typ] = bytes(buf[voff:vend])
            off = vend
        missing = [n for t, n in ((NAME, "training"), (NODE, "node"), (KEY, "key"),
                                  (KEY_NAME, "key name")) if t not in got]
        if missing:
            raise DecodeError(f"aggregator configuration lacks {', '.join(missing)}")

        def number(typ: int, default: int) -> int:
            return decode_nonneg(got[typ], 0, len(got[typ])) if typ in got else default

        if not got[NAME] or not got[KEY]:
            raise DecodeError("aggregator configuration has an empty training or key")
        component_offsets(got[NAME])            # names that parse, or DecodeError
        component_offsets(got[KEY_NAME])
        node = _decode_text(got[NODE])
        slots, timeout = number(SLOTS, 1024), number(TIMEOUT_MS, 2000) / 1000
        try:
            return cls(got[NAME], node, got[KEY], got[KEY_NAME], slots, timeout, number(FIRST, 0))
        except ValueError as e:                 # out of bounds (__post_init__)
            raise DecodeError(f"aggregator configuration: {e}") from None


# ---- the Interest -------------------------------------------------------------------------------

_MUST_BE_FRESH: Final = bytes((MUST_BE_FRESH, 0))
Key = Union[bytes, hmac.HMAC]     # the training's key, or an HMAC object keyed with it (copied)


def _mac(key: Key) -> hmac.HMAC:
    return key.copy() if isinstance(key, hmac.HMAC) else hmac.new(key, digestmod=hashlib.sha256)


def signed_parameters(name: bytes, plan: bytes, key: Key, key_name: bytes) -> tuple[bytes, bytes]:
    """The signed part of an `*aggregate*` Interest for `name` (TLV-VALUE, without digest)
    carrying `plan`, in NDN packet format v0.3: ApplicationParameters, InterestSignatureInfo
    (SignatureType 4, HMAC-SHA256; KeyLocator: `key_name`, a TLV-VALUE), InterestSignatureValue
    (the HMAC of the name's components, the parameters and the signature info). No
    SignatureNonce or SignatureTime: the same request signs to the same bytes, so its name —
    whose digest covers the signature — is the same at every retransmission and from every
    requester (a retransmission finds its pending sum, identical requests merge, the Content
    Store answers them). Returns (the full name's TLV-VALUE, with its
    ParametersSha256DigestComponent over these elements; the elements)."""
    params = encode_tlv(APP_PARAMETERS, plan)
    info = encode_tlv(INTEREST_SIGNATURE_INFO, b"".join((
        nonneg_element(SIGNATURE_TYPE, HMAC_WITH_SHA256),
        encode_tlv(KEY_LOCATOR, encode_tlv(NAME, key_name)))))
    h = _mac(key)
    h.update(name)
    h.update(params)
    h.update(info)
    signed = b"".join((params, info, encode_tlv(INTEREST_SIGNATURE_VALUE, h.digest())))
    return name + encode_tlv(PARAMS_DIGEST, hashlib.sha256(signed).digest()), signed


def encode_interest(name: bytes, plan: bytes, hint: str, lifetime_ms: int, key: Key,
                    key_name: bytes, nonce: bytes | None = None) -> tuple[bytes, bytes]:
    """An `*aggregate*` Interest for `name` (TLV-VALUE, without digest) carrying `plan`, signed
    under the training's `key` (`signed_parameters`), routed toward node `hint`; MustBeFresh,
    as every Interest for a contribution (a cached copy that was refused must not answer the
    retry). Returns (wire, the full name's TLV-VALUE with its ParametersSha256DigestComponent:
    the name its Data carries)."""
    full, signed = signed_parameters(name, plan, key, key_name)
    return assemble_interest(full, signed, hint, lifetime_ms, nonce), full


def assemble_interest(full: bytes, signed: bytes, hint: str, lifetime_ms: int,
                      nonce: bytes | None = None) -> bytes:
    """The Interest of `signed_parameters`' (full name, signed elements), with its own Nonce
    (each expression of the same request has another; the signature does not cover it)."""
    hint_name = encode_tlv(NAME, encode_tlv(GENERIC_COMPONENT, _text(hint)))
    body = b"".join((encode_tlv(NAME, full), _MUST_BE_FRESH,
                     encode_tlv(FORWARDING_HINT, hint_name),
                     encode_tlv(NONCE, nonce or os.urandom(4)),
                     nonneg_element(INTEREST_LIFETIME, lifetime_ms), signed))
    return tl(INTEREST, len(body)) + body


def full_name(name: bytes, plan: bytes, key: Key, key_name: bytes) -> bytes:
    """The name (TLV-VALUE) an `*aggregate*` Interest for `name` carrying `plan` has, signed
    under `key`, and its Data's: `name` and its ParametersSha256DigestComponent."""
    return signed_parameters(name, plan, key, key_name)[0]


def signed_plan(wire: bytes, name: bytes, key: Key, key_name: bytes) -> bytes | None:
    """The plan of the Interest `wire` (named `name`, its Name's TLV-VALUE) when it is signed
    under the training's `key` as `signed_parameters` signs (SignatureNonce, SignatureTime or
    SignatureSeqNum, as other signers add them, are covered too), else None: unsigned, of
    another signature type or KeyLocator, a wrong signature value (a forgery, another key), a
    name whose ParametersSha256DigestComponent is not the digest of the signed elements, an
    element after the signature, or malformed."""
    try:
        offsets = component_offsets(name)       # each component's end
        last = offsets[-2] if len(offsets) > 1 else 0
        typ, doff, dend = read_tl(name, last, len(name))
        if typ != PARAMS_DIGEST or dend - doff != 32 or dend != len(name):
            return None
        typ, off, end = read_tl(wire, 0, len(wire))
        if typ != INTEREST:
            return None
        while off < end:                         # to the ApplicationParameters
            typ, voff, vend = read_tl(wire, off, end)
            if typ == APP_PARAMETERS:
                break
            off = vend
        else:
            return None                          # unsigned: no parameters at all
        start, plan = off, wire[voff:vend]
        typ, ioff, iend = read_tl(wire, vend, end)
        if typ != INTEREST_SIGNATURE_INFO:
            return None
        typ, soff, send = read_tl(wire, iend, end)
        if typ != INTEREST_SIGNATURE_VALUE or send != end or send - soff != 32:
            return None
        if hashlib.sha256(wire[start:end]).digest() != name[doff:dend]:
            return None
        sig_type, locator = -1, None
        while ioff < iend:
            typ, voff, vend = read_tl(wire, ioff, iend)
            if typ == SIGNATURE_TYPE:
                sig_type = decode_nonneg(wire, voff, vend)
            elif typ == KEY_LOCATOR:
                ltyp, loff, lend = read_tl(wire, voff, vend)
                locator = wire[loff:lend] if ltyp == NAME and lend == vend else None
            ioff = vend
        if sig_type != HMAC_WITH_SHA256 or locator != key_name:
            return None
        h = _mac(key)
        h.update(name[:last])
        h.update(wire[start:iend])
        return plan if hmac.compare_digest(h.digest(), wire[soff:send]) else None
    except DecodeError:
        return None


def application_parameters(wire: bytes) -> bytes | None:
    """An Interest's ApplicationParameters value, or None (DecodeError when malformed)."""
    typ, off, end = read_tl(wire, 0, len(wire))
    if typ != INTEREST:
        raise DecodeError("not an Interest")
    while off < end:
        typ, voff, vend = read_tl(wire, off, end)
        if typ == APP_PARAMETERS:
            return wire[voff:vend]
        off = vend
    return None


# ---- contributions and sums ---------------------------------------------------------------------

def verified_content(wire: bytes | memoryview, key: Key) -> memoryview | None:
    """The Content of a Data signed with HMAC-SHA256 under `key` (the key, or an HMAC object
    keyed with it, copied per check: no re-keying per packet), or None when its signature is
    of another type or wrong (a forgery), or it is malformed. A view into `wire`: nothing of
    the ~8 KB is copied, neither for the HMAC nor for the caller."""
    try:
        typ, off, end = read_tl(wire, 0, len(wire))
        if typ != DATA:
            return None
        view = memoryview(wire)
        content = view[0:0]
        sig_type = -1
        signed_from = off
        while off < end:
            typ, voff, vend = read_tl(wire, off, end)
            if typ == CONTENT:
                content = view[voff:vend]
            elif typ == SIGNATURE_INFO:
                st, sv, se = read_tl(wire, voff, vend)
                if st == SIGNATURE_TYPE:
                    sig_type = decode_nonneg(wire, sv, se)
            elif typ == SIGNATURE_VALUE:
                if sig_type != HMAC_WITH_SHA256 or vend - voff != 32:
                    return None
                h = _mac(key)
                h.update(view[signed_from:off])
                return content if hmac.compare_digest(h.digest(), view[voff:vend]) else None
            off = vend
    except DecodeError:
        return None
    return None


def signed_data(name: bytes, content: bytes, key: Key, key_name: bytes,
                freshness_ms: int = 1000) -> bytes:
    """A Data named `name` (TLV-VALUE) carrying `content`, HMAC-signed under `key`."""
    def sign(blocks) -> bytes:
        h = _mac(key)
        for b in blocks:
            h.update(b)
        return h.digest()

    info = encode_signature_info(HMAC_WITH_SHA256, [key_name])
    return encode_data([name], encode_meta_info(freshness_ms), content, info, sign)
