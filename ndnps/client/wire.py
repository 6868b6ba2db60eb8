"""The client's packets on the NDN base: what an app receives, decoded once into views of the
bytes it came in, and what it sends, encoded by the base's fixed-shape encoders.

Per-packet module (typed, no dynamic tricks: compilable with mypyc like the base's).

- ``Data``, ``parse_data``: a received Data — its name (the Name's TLV-VALUE ``key``, the
  components when asked), MetaInfo fields, Content, and the signed portion and
  SignatureValue as offsets into the received bytes: the Content is a memoryview of them and
  the signature is checked over a slice of them as parsed, nothing re-encoded or copied.
- ``Interest``, ``parse_interest``: a received Interest, with its ApplicationParameters
  (checked against the name's ParametersSha256DigestComponent, as NDN v0.3 requires) and the
  PIT token its answer must echo.
- ``parse_lp``: the network packet of an LpPacket that carries only what a forwarder adds on
  the way to an app (a PIT token, a CongestionMark), read at fixed offsets; any other
  LpPacket (a Nack, link fields) is the base's general decoder's (``ndnps.ndn.packet.decode``).
- ``make_data``: a signed Data (``ndnps.ndn.encoders.encode_data``).

Malformed input raises ``DecodeError`` (the base's): the caller drops and counts it.
"""
from __future__ import annotations

import hashlib
from typing import Final, Sequence, Union

from ndnps.ndn.encoders import Bytes, encode_data, encode_meta_info
from ndnps.ndn.tlv import (APP_PARAMETERS, CAN_BE_PREFIX, CONTENT, CONTENT_TYPE, DATA,
                           FINAL_BLOCK_ID, FORWARDING_HINT, FRESHNESS_PERIOD, HOP_LIMIT, INTEREST,
                           INTEREST_LIFETIME, INTEREST_SIGNATURE_INFO, INTEREST_SIGNATURE_VALUE,
                           KEY_LOCATOR, LP_CONGESTION_MARK, LP_FRAGMENT, LP_PACKET, LP_PIT_TOKEN,
                           META_INFO, MUST_BE_FRESH, NAME, NONCE, PARAMS_DIGEST, SIGNATURE_INFO,
                           SIGNATURE_TYPE, SIGNATURE_VALUE, DecodeError, decode_nonneg,
                           encode_varnum, name_from_str, read_tl, short_length)

from .signer import Signer

DEFAULT_LIFETIME: Final = 4000             # ms: an Interest's lifetime when it states none
_MARK_TYPE: Final = encode_varnum(LP_CONGESTION_MARK)     # 3 octets; a 1-octet LENGTH follows
_ABSENT: Final = -1

# what the app API takes as a name: a list of encoded components (names.FormalName), or an
# NDN URI of generic components ("/a/b%2Ac")
NameLike = Union[str, Sequence[Bytes]]


def components(value: bytes) -> list[bytes]:
    """The encoded components of a Name's TLV-VALUE (DecodeError when malformed)."""
    out = []
    pos = 0
    end = len(value)
    while pos < end:
        size = value[pos + 1] if pos + 1 < end else 255
        if value[pos] < 253 and size < 253:           # the usual head, read inline
            cend = pos + 2 + size
            if cend > end:
                raise DecodeError("name component exceeds the name")
        else:
            _, _, cend = read_tl(value, pos, end)
        out.append(value[pos:cend])
        pos = cend
    return out


def normalize(name: NameLike) -> Sequence[Bytes]:
    """A name's encoded components: an NDN URI parsed, a list of components as it is."""
    if isinstance(name, str):
        return components(name_from_str(name))
    return name


def name_key(name: Sequence[Bytes]) -> bytes:
    """A name's TLV-VALUE: the key the pending table and the handlers use (a prefix's key is
    a byte prefix of its names' keys)."""
    return b"".join(name)


# ---- Data ---------------------------------------------------------------------------------

class Data:
    """A received Data, as views of `buf` (the bytes it arrived in, from `start` to `end`):
    `key` the Name's TLV-VALUE; MetaInfo's `content_type`, `freshness_period` (None when
    absent) and `final_block_id` (the encoded component, or None); `signature_type` (-1:
    unsigned), `key_locator` (a KeyLocator Name's TLV-VALUE, or None); `mark` the
    CongestionMark it came with (0: none).  ``content``, ``covered`` (the signed portion:
    Name to SignatureInfo) and ``signature_value`` are read off the offsets when asked."""

    __slots__ = ("buf", "start", "end", "key", "content_type", "freshness_period",
                 "final_block_id", "signature_type", "key_locator", "content_start",
                 "content_end", "signed_start", "signed_end", "value_start", "value_end",
                 "mark", "_name")

    def __init__(self, buf: bytes, start: int, end: int, key: bytes, mark: int = 0) -> None:
        self.buf = buf
        self.start = start
        self.end = end
        self.key = key
        self.mark = mark
        self.content_type = 0
        self.freshness_period: int | None = None
        self.final_block_id: bytes | None = None
        self.signature_type = _ABSENT
        self.key_locator: bytes | None = None
        self.content_start = _ABSENT
        self.content_end = _ABSENT
        self.signed_start = _ABSENT
        self.signed_end = _ABSENT
        self.value_start = _ABSENT
        self.value_end = _ABSENT
        self._name: list[bytes] | None = None

    @property
    def name(self) -> list[bytes]:
        """The encoded components (computed once)."""
        name = self._name
        if name is None:
            name = self._name = components(self.key)
        return name

    @property
    def content(self) -> memoryview:
        """The Content's value, a view of the received bytes (empty when absent)."""
        if self.content_start == _ABSENT:
            return memoryview(b"")
        return memoryview(self.buf)[self.content_start:self.content_end]

    @property
    def wire(self) -> Bytes:
        """The Data TLV as received (the bytes themselves when it came bare)."""
        if self.start == 0 and self.end == len(self.buf):
            return self.buf
        return memoryview(self.buf)[self.start:self.end]

    @property
    def covered(self) -> memoryview:
        """What the signature covers: from the Name to the SignatureInfo, as received."""
        return memoryview(self.buf)[self.signed_start:self.signed_end]

    @property
    def signature_value(self) -> bytes:
        return self.buf[self.value_start:self.value_end] if self.value_start != _ABSENT else b""


def _elements(buf: bytes, pos: int, end: int) -> list[tuple[int, int, int]]:
    """(TLV-TYPE, value start, value end) of each element in `buf[pos:end]`, in one walk: the
    usual heads (a 1-octet TYPE, a 1- or 3-octet LENGTH) read inline, the rest by read_tl."""
    out = []
    while pos < end:
        typ = buf[pos]
        size = buf[pos + 1] if pos + 1 < end else 255
        if typ < 253 and size < 253:
            s = pos + 2
            e = s + size
        elif typ < 253 and size == 253 and pos + 3 < end:
            s = pos + 4
            e = s + ((buf[pos + 2] << 8) | buf[pos + 3])
        else:
            typ, s, e = read_tl(buf, pos, end)
        if e > end:
            raise DecodeError(f"TLV 0x{typ:x} exceeds its container")
        out.append((typ, s, e))
        pos = e
    return out


def parse_data(buf: bytes, start: int = 0, end: int = -1, mark: int = 0) -> Data:
    """The Data TLV at `buf[start:end]` (`end` -1: to the end), with the CongestionMark it came
    with.  Elements in v0.3's order — Name, [MetaInfo], [Content], SignatureInfo,
    SignatureValue; unknown non-critical elements are skipped, anything else is a DecodeError
    (an unsigned Data parses, with signature_type -1: no validator passes it).  The name's
    components are checked when first read (``Data.name``): a pending Interest is matched by
    the Name's bytes, which cannot equal a malformed one."""
    if end < 0:
        end = len(buf)
    outer = _elements(buf, start, end)
    if len(outer) != 1 or outer[0][0] != DATA:
        raise DecodeError("not a Data")
    _, pos, _ = outer[0]
    elements = _elements(buf, pos, end)
    if not elements or elements[0][0] != NAME:
        raise DecodeError("Data does not start with a Name")
    _, nstart, nend = elements[0]
    d = Data(buf, start, end, buf[nstart:nend], mark)
    d.signed_start = pos
    stage = 0               # 1 MetaInfo, 2 Content, 3 SignatureInfo, 4 SignatureValue seen
    for i in range(1, len(elements)):
        typ, s, e = elements[i]
        if typ == META_INFO and stage < 1:
            _meta_info(d, buf, s, e)
            stage = 1
        elif typ == CONTENT and stage < 2:
            d.content_start = s
            d.content_end = e
            stage = 2
        elif typ == SIGNATURE_INFO and stage < 3:
            _signature_info(d, buf, s, e)
            d.signed_end = e
            stage = 3
        elif typ == SIGNATURE_VALUE and stage == 3:
            d.value_start = s
            d.value_end = e
            stage = 4
        elif typ < 32 or typ & 1:
            raise DecodeError(f"unexpected element 0x{typ:x} in Data")
    if stage == 3:
        raise DecodeError("SignatureInfo without a SignatureValue")
    return d


def _meta_info(d: Data, buf: bytes, pos: int, end: int) -> None:
    for typ, s, e in _elements(buf, pos, end):
        if typ == CONTENT_TYPE:
            d.content_type = decode_nonneg(buf, s, e)
        elif typ == FRESHNESS_PERIOD:
            d.freshness_period = decode_nonneg(buf, s, e)
        elif typ == FINAL_BLOCK_ID:
            d.final_block_id = buf[s:e]
        elif typ < 32 or typ & 1:
            raise DecodeError(f"unexpected element 0x{typ:x} in MetaInfo")


def _signature_info(d: Data, buf: bytes, pos: int, end: int) -> None:
    """SignatureType and a KeyLocator Name; the rest (ValidityPeriod, a KeyDigest...) is for
    signature types this client does not check."""
    for typ, s, e in _elements(buf, pos, end):
        if typ == SIGNATURE_TYPE:
            d.signature_type = decode_nonneg(buf, s, e)
        elif typ == KEY_LOCATOR:
            ktyp, ks, ke = read_tl(buf, s, e)
            if ktyp == NAME:
                d.key_locator = buf[ks:ke]
    if d.signature_type == _ABSENT:
        raise DecodeError("SignatureInfo without a SignatureType")


def make_data(name: NameLike, content: Bytes | None, signer: Signer,
              freshness_period: int | None = None, final_block_id: Bytes | None = None,
              content_type: int = 0) -> bytes:
    """One signed Data packet (MetaInfo with ContentType, and FreshnessPeriod and FinalBlockId
    when given): python-ndn's ``make_data`` bytes."""
    meta = encode_meta_info(freshness_period, final_block_id, content_type)
    return encode_data(normalize(name), meta, content, signer.signature_info, signer.sign)


# ---- Interest -----------------------------------------------------------------------------

class Interest:
    """A received Interest, as views of `buf`: `key` the Name's TLV-VALUE, `can_be_prefix`,
    `must_be_fresh`, `nonce` (None: none), `lifetime` (ms), `hop_limit` (None: none),
    `pit_token` (the NDNLPv2 PitToken its answer must carry, or None), `mark`.
    ``app_parameters`` is the ApplicationParameters' value, or None."""

    __slots__ = ("buf", "start", "end", "key", "can_be_prefix", "must_be_fresh", "nonce",
                 "lifetime", "hop_limit", "params_start", "params_end", "pit_token", "mark",
                 "_name")

    def __init__(self, buf: bytes, start: int, end: int, key: bytes) -> None:
        self.buf = buf
        self.start = start
        self.end = end
        self.key = key
        self.can_be_prefix = False
        self.must_be_fresh = False
        self.nonce: int | None = None
        self.lifetime = DEFAULT_LIFETIME
        self.hop_limit: int | None = None
        self.params_start = _ABSENT
        self.params_end = _ABSENT
        self.pit_token: bytes | None = None
        self.mark = 0
        self._name: list[bytes] | None = None

    @property
    def name(self) -> list[bytes]:
        name = self._name
        if name is None:
            name = self._name = components(self.key)
        return name

    @property
    def app_parameters(self) -> memoryview | None:
        if self.params_start == _ABSENT:
            return None
        return memoryview(self.buf)[self.params_start:self.params_end]

    @property
    def wire(self) -> Bytes:
        if self.start == 0 and self.end == len(self.buf):
            return self.buf
        return memoryview(self.buf)[self.start:self.end]


# the optional elements after the Name, in the order v0.3 requires
_INTEREST_ORDER: Final = {CAN_BE_PREFIX: 0, MUST_BE_FRESH: 1, FORWARDING_HINT: 2, NONCE: 3,
                          INTEREST_LIFETIME: 4, HOP_LIMIT: 5, APP_PARAMETERS: 6,
                          INTEREST_SIGNATURE_INFO: 7, INTEREST_SIGNATURE_VALUE: 8}


def parse_interest(buf: bytes, start: int = 0, end: int = -1,
                   pit_token: bytes | None = None, mark: int = 0) -> Interest:
    """The Interest TLV at `buf[start:end]`.  DecodeError: malformed, elements out of v0.3's
    order, an unknown critical element, or ApplicationParameters that the name's
    ParametersSha256DigestComponent does not match (or that it lacks)."""
    if end < 0:
        end = len(buf)
    outer = _elements(buf, start, end)
    if len(outer) != 1 or outer[0][0] != INTEREST:
        raise DecodeError("not an Interest")
    elements = _elements(buf, outer[0][1], end)
    if not elements or elements[0][0] != NAME or elements[0][1] == elements[0][2]:
        raise DecodeError("Interest without a Name")
    _, nstart, nend = elements[0]
    i = Interest(buf, start, end, buf[nstart:nend])
    i._name = components(i.key)             # (checked: a malformed name is a malformed packet)
    i.pit_token = pit_token
    i.mark = mark
    last = -1
    params_at = _ABSENT
    for n in range(1, len(elements)):
        typ, s, e = elements[n]
        rank = _INTEREST_ORDER.get(typ, -1)
        if rank < 0:
            if typ < 32 or typ & 1:
                raise DecodeError(f"unexpected element 0x{typ:x} in Interest")
            continue
        if rank <= last:
            raise DecodeError(f"element 0x{typ:x} out of order in Interest")
        last = rank
        if typ == CAN_BE_PREFIX:
            i.can_be_prefix = True
        elif typ == MUST_BE_FRESH:
            i.must_be_fresh = True
        elif typ == NONCE:
            if e - s != 4:
                raise DecodeError("Nonce must be 4 octets")
            i.nonce = int.from_bytes(buf[s:e], "big")
        elif typ == INTEREST_LIFETIME:
            i.lifetime = decode_nonneg(buf, s, e)
        elif typ == HOP_LIMIT:
            if e - s != 1:
                raise DecodeError("HopLimit must be 1 octet")
            i.hop_limit = buf[s]
        elif typ == APP_PARAMETERS:
            i.params_start = s
            i.params_end = e
            params_at = s - 2 if e - s < 253 else s - 4
    if params_at != _ABSENT:
        digest = _params_digest(i.key)
        if digest is None or hashlib.sha256(memoryview(buf)[params_at:end]).digest() != digest:
            raise DecodeError("ParametersSha256DigestComponent missing or wrong")
    return i


def _params_digest(key: bytes) -> bytes | None:
    """The value of the ParametersSha256DigestComponent in a name (at most one), or None."""
    pos = 0
    end = len(key)
    found: bytes | None = None
    while pos < end:
        typ, s, e = read_tl(key, pos, end)
        if typ == PARAMS_DIGEST:
            if found is not None or e - s != 32:
                raise DecodeError("bad ParametersSha256DigestComponent")
            found = key[s:e]
        pos = e
    return found


# ---- NDNLPv2, the forwarder's usual headers -------------------------------------------------

def parse_lp(buf: bytes) -> tuple[int, int, int, bytes | None] | None:
    """``(fragment start, fragment end, congestion mark (0: none), PIT token or None)`` for an
    LpPacket that holds a PitToken and/or a CongestionMark, in that order, then a non-empty
    Fragment that ends it; None for any other LpPacket or a malformed one (a Nack, link
    reliability or fragmentation fields: ``ndnps.ndn.packet.decode``'s).  Read at fixed
    offsets, as the forwarder writes it (a third of the cost of a TLV walk)."""
    try:
        total = len(buf)
        outer = short_length(buf, 1)
        if buf[0] != LP_PACKET or outer is None or outer[0] + outer[1] != total:
            return None
        off = outer[0]
        token: bytes | None = None
        if buf[off] == LP_PIT_TOKEN:
            size = buf[off + 1]
            if not 0 < size <= 32:
                return None
            token = buf[off + 2:off + 2 + size]
            off += 2 + size
        mark = 0
        if buf.startswith(_MARK_TYPE, off):
            start = off + 4
            off = start + buf[off + 3]
            mark = decode_nonneg(buf, start, off)
        if buf[off] != LP_FRAGMENT:
            return None
        fragment = short_length(buf, off + 1)
    except (IndexError, ValueError):
        return None
    if fragment is None or not fragment[1] or fragment[0] + fragment[1] != total:
        return None
    return fragment[0], total, mark, token
