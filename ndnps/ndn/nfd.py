"""NFD's defaults that the forwarder and the apps keep to alike, and the management protocol's
ControlParameters and ControlResponse (NFD Management Protocol: a control command is an
Interest `/localhost/nfd/<module>/<verb>/<ControlParameters>` signed as NDN packet format v0.3
signs Interests; its Data carries a ControlResponse).  The encoder writes the fields in
NFD's order and integer widths, as python-ndn's ``make_command_v2`` does; the decoder reads
every field NFD answers with and skips non-critical ones it does not know."""
from __future__ import annotations

from typing import Final, Mapping

from .tlv import (GENERIC_COMPONENT, NAME, DecodeError, decode_nonneg, encode_tlv,
                  nonneg_element, read_tl, tl)

# RetxSuppressionExponential (best-route): a retransmission sooner than the interval after the
# last one forwarded for the same PIT entry is suppressed; each one forwarded multiplies it
RETX_INITIAL: Final = 0.010
RETX_MAX: Final = 0.250
RETX_MULTIPLIER: Final = 2.0

# ---- the management protocol ----------------------------------------------------------------

CONTROL_PARAMETERS: Final = 0x68
CONTROL_RESPONSE: Final = 0x65
STATUS_CODE: Final = 0x66
STATUS_TEXT: Final = 0x67
# ControlParameters fields, in the order NFD writes them
FACE_ID: Final = 0x69
URI: Final = 0x72
LOCAL_URI: Final = 0x81
ORIGIN: Final = 0x6F
COST: Final = 0x6A
CAPACITY: Final = 0x83
COUNT: Final = 0x84
BASE_CONGESTION_MARKING_INTERVAL: Final = 0x87
DEFAULT_CONGESTION_THRESHOLD: Final = 0x88
MTU: Final = 0x89
FLAGS: Final = 0x6C
MASK: Final = 0x70
STRATEGY: Final = 0x6B
EXPIRATION_PERIOD: Final = 0x6D
FACE_PERSISTENCY: Final = 0x85

# Face flags (NFD's FaceFlags bits)
FLAG_LOCAL_FIELDS: Final = 1
FLAG_LP_RELIABILITY: Final = 2
FLAG_CONGESTION_MARKING: Final = 4

LOCALHOST: Final = encode_tlv(GENERIC_COMPONENT, b"localhost")
LOCALHOP: Final = encode_tlv(GENERIC_COMPONENT, b"localhop")
NFD: Final = encode_tlv(GENERIC_COMPONENT, b"nfd")

# the integer fields, by keyword, in NFD's order (Name, Uri, LocalUri, Strategy apart)
_INTEGERS: Final = {
    "face_id": FACE_ID, "origin": ORIGIN, "cost": COST, "capacity": CAPACITY, "count": COUNT,
    "base_congestion_marking_interval": BASE_CONGESTION_MARKING_INTERVAL,
    "default_congestion_threshold": DEFAULT_CONGESTION_THRESHOLD, "mtu": MTU, "flags": FLAGS,
    "mask": MASK, "expiration_period": EXPIRATION_PERIOD, "face_persistency": FACE_PERSISTENCY,
}
_BY_TYPE: Final = {typ: key for key, typ in _INTEGERS.items()}


class ControlParameters:
    """The fields of a ControlParameters element: `name` a Name's TLV-VALUE (the encoded
    components), `uri`, `local_uri` text, `strategy` a Name's TLV-VALUE, integers by their
    snake_case name (`face_id`, `origin`, `cost`, `flags`, `mask`, ...) in `ints`; absent
    fields are None / missing."""

    __slots__ = ("name", "uri", "local_uri", "strategy", "ints")

    def __init__(self) -> None:
        self.name: bytes | None = None
        self.uri: str | None = None
        self.local_uri: str | None = None
        self.strategy: bytes | None = None
        self.ints: dict[str, int] = {}

    def get(self, key: str) -> int | None:
        return self.ints.get(key)

    @property
    def flags(self) -> int | None:
        return self.ints.get("flags")


class ControlResponse:
    """A command's answer: `code` (200 OK, 4xx/5xx errors, NFD's), `text`, and the
    ControlParameters the forwarder answered with (empty when it sent none)."""

    __slots__ = ("code", "text", "params")

    def __init__(self, code: int, text: str, params: ControlParameters) -> None:
        self.code = code
        self.text = text
        self.params = params

    @property
    def ok(self) -> bool:
        return self.code == 200


def control_parameters(name: bytes | None = None, ints: Mapping[str, int] | None = None,
                       uri: str | None = None, local_uri: str | None = None,
                       strategy: bytes | None = None) -> bytes:
    """A ControlParameters element (TLV-TYPE 0x68): `name` and `strategy` as Names' TLV-VALUEs,
    `ints` the integer fields by name (`face_id`, `origin`, `cost`, `capacity`, `count`,
    `mtu`, `flags`, `mask`, `expiration_period`, `face_persistency`, ...), each a
    NonNegativeInteger in its shortest form; ValueError names an unknown field or a negative
    value."""
    ints = ints or {}
    for key in ints:
        if key not in _INTEGERS:
            raise ValueError(f"ControlParameters: unknown field {key!r}")
    parts: list[bytes] = []
    if name is not None:
        parts.append(tl(NAME, len(name)) + name)
    if "face_id" in ints:
        parts.append(nonneg_element(FACE_ID, ints["face_id"]))
    if uri is not None:
        parts.append(encode_tlv(URI, uri.encode()))
    if local_uri is not None:
        parts.append(encode_tlv(LOCAL_URI, local_uri.encode()))
    for key in ("origin", "cost", "capacity", "count", "base_congestion_marking_interval",
                "default_congestion_threshold", "mtu", "flags", "mask"):
        if key in ints:
            parts.append(nonneg_element(_INTEGERS[key], ints[key]))
    if strategy is not None:
        parts.append(encode_tlv(STRATEGY, tl(NAME, len(strategy)) + strategy))
    for key in ("expiration_period", "face_persistency"):
        if key in ints:
            parts.append(nonneg_element(_INTEGERS[key], ints[key]))
    return encode_tlv(CONTROL_PARAMETERS, b"".join(parts))


def command_name(module: str, verb: str, parameters: bytes, local: bool = True) -> list[bytes]:
    """The components of a control command's name, before its ParametersSha256Digest:
    /localhost/nfd/<module>/<verb>/<parameters> (/localhop/... on a non-local face)."""
    return [LOCALHOST if local else LOCALHOP, NFD,
            encode_tlv(GENERIC_COMPONENT, module.encode()),
            encode_tlv(GENERIC_COMPONENT, verb.encode()),
            encode_tlv(GENERIC_COMPONENT, parameters)]


def control_response(code: int, text: str, parameters: bytes | None = None) -> bytes:
    """A ControlResponse element: StatusCode, StatusText and the ControlParameters element
    answered with (`control_parameters`), if any."""
    body = nonneg_element(STATUS_CODE, code) + encode_tlv(STATUS_TEXT, text.encode())
    return encode_tlv(CONTROL_RESPONSE, body + (parameters or b""))


def parse_control_parameters(buf: bytes, start: int, end: int) -> ControlParameters:
    """The fields of ControlParameters' TLV-VALUE `buf[start:end]` (DecodeError: malformed,
    or an unknown critical field)."""
    cp = ControlParameters()
    off = start
    while off < end:
        typ, voff, off = read_tl(buf, off, end)
        if typ == NAME:
            cp.name = buf[voff:off]
        elif typ == URI:
            cp.uri = buf[voff:off].decode("utf-8", "replace")
        elif typ == LOCAL_URI:
            cp.local_uri = buf[voff:off].decode("utf-8", "replace")
        elif typ == STRATEGY:
            ntyp, noff, nend = read_tl(buf, voff, off)
            if ntyp != NAME or nend != off:
                raise DecodeError("Strategy without a Name")
            cp.strategy = buf[noff:nend]
        elif typ in _BY_TYPE:
            cp.ints[_BY_TYPE[typ]] = decode_nonneg(buf, voff, off)
        elif typ < 32 or typ & 1:
            raise DecodeError(f"unexpected critical element 0x{typ:x} in ControlParameters")
    return cp


def parse_control_response(buf: bytes) -> ControlResponse:
    """A ControlResponse element (a command's Data Content); DecodeError when it is not one
    or lacks its StatusCode."""
    typ, off, end = read_tl(buf, 0, len(buf))
    if typ != CONTROL_RESPONSE or end != len(buf):
        raise DecodeError("not a ControlResponse")
    code: int | None = None
    text = ""
    params = ControlParameters()
    while off < end:
        typ, voff, off = read_tl(buf, off, end)
        if typ == STATUS_CODE:
            code = decode_nonneg(buf, voff, off)
        elif typ == STATUS_TEXT:
            text = buf[voff:off].decode("utf-8", "replace")
        elif typ == CONTROL_PARAMETERS:
            params = parse_control_parameters(buf, voff, off)
        elif typ < 32 or typ & 1:
            raise DecodeError(f"unexpected critical element 0x{typ:x} in ControlResponse")
    if code is None:
        raise DecodeError("ControlResponse without a StatusCode")
    return ControlResponse(code, text, params)
