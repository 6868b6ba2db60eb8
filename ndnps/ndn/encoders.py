"""The fixed-shape encoders of what the apps send: Data, and Interests with or without
ApplicationParameters, signed or not, hinted.

The packets the apps send have one fixed shape, written here directly (python-ndn's generic
model costs 30-50 µs a packet, most of it in the model rather than the bytes): encode_data
writes Name, MetaInfo, Content, SignatureInfo, SignatureValue, byte-identical to
ndn.encoding.make_data with the signers of ndnps.client.security; encode_interest writes Name,
CanBePrefix, MustBeFresh, Nonce, InterestLifetime, HopLimit, byte-identical to make_interest for
an Interest without ApplicationParameters, signature or ForwardingHint; encode_interest_full
any other Interest the apps send (tests/unit/test_wire.py compares them over many shapes).
What arrives is decoded, and what the forwarder adds is encoded, by packet.py.
"""
from __future__ import annotations

import hashlib
from typing import Callable, Final, Sequence, Union

from .tlv import (
    APP_PARAMETERS, CAN_BE_PREFIX, CONTENT, CONTENT_TYPE, DATA, FINAL_BLOCK_ID, FORWARDING_HINT,
    FRESHNESS_PERIOD, HOP_LIMIT, INTEREST, INTEREST_LIFETIME, INTEREST_SIGNATURE_INFO,
    INTEREST_SIGNATURE_VALUE, KEY_LOCATOR, META_INFO, MUST_BE_FRESH, NAME, PARAMS_DIGEST,
    SIGNATURE_INFO, SIGNATURE_TYPE, SIGNATURE_VALUE, nonneg_element, tl,
)

# what the encoders take: python-ndn's names hold bytearrays and memoryviews too (spelled out
# for the optional mypyc build, which checks argument types at run time)
Bytes = Union[bytes, bytearray, memoryview]
# Signs the covered blocks (Name .. SignatureInfo, in order) and returns the value.
SignFn = Callable[[Sequence[Bytes]], bytes]
# component types an Interest without ApplicationParameters may not carry (as make_interest)
INVALID_INTEREST_COMPONENT: Final = (0x00, 0x02)
_CAN_BE_PREFIX_EL: Final = bytes((CAN_BE_PREFIX, 0))
_MUST_BE_FRESH_EL: Final = bytes((MUST_BE_FRESH, 0))


def encode_name(name: Sequence[Bytes]) -> bytes:
    """A Name element from a FormalName (components with their TL)."""
    value = b"".join(name)
    return tl(NAME, len(value)) + value


def encode_meta_info(freshness_ms: int | None = None, final_block_id: Bytes | None = None,
                     content_type: int | None = 0) -> bytes:
    """The MetaInfo element ``make_data`` writes for ``MetaInfo(content_type, freshness_ms,
    final_block_id)`` (python-ndn always writes ContentType, BLOB = 0 by default)."""
    value = b""
    if content_type is not None:
        value += nonneg_element(CONTENT_TYPE, content_type)
    if freshness_ms is not None:
        value += nonneg_element(FRESHNESS_PERIOD, freshness_ms)
    if final_block_id is not None:
        value += tl(FINAL_BLOCK_ID, len(final_block_id)) + bytes(final_block_id)
    return tl(META_INFO, len(value)) + value


def encode_signature_info(signature_type: int, key_name: Sequence[Bytes] | None = None) -> bytes:
    """SignatureInfo: SignatureType (1 byte, as python-ndn writes it) and a KeyLocator Name."""
    value = bytes((SIGNATURE_TYPE, 1, signature_type))
    if key_name is not None:
        kl = encode_name(key_name)
        value += tl(KEY_LOCATOR, len(kl)) + kl
    return tl(SIGNATURE_INFO, len(value)) + value


def encode_data(name: Sequence[Bytes], meta_info: bytes, content: Bytes | None,
                signature_info: bytes, sign: SignFn, value_size: int = 32) -> bytes:
    """One signed Data packet.  ``meta_info`` and ``signature_info`` are whole elements
    (``encode_meta_info``, ``encode_signature_info``), encoded once per object; ``sign``
    gets the covered blocks and returns a SignatureValue of ``value_size`` bytes.  The content
    is copied once, into the result."""
    name_el = encode_name(name)
    if content is None:
        covered: tuple[Bytes, ...] = (name_el, meta_info, signature_info)
        clen = 0
    else:
        ctl = tl(CONTENT, len(content))
        covered = (name_el, meta_info, ctl, content, signature_info)
        clen = len(ctl) + len(content)
    value = sign(covered)
    if len(value) != value_size:
        raise ValueError("signature value of unexpected size")
    sv = tl(SIGNATURE_VALUE, value_size) + value
    length = len(name_el) + len(meta_info) + clen + len(signature_info) + len(sv)
    return b"".join((tl(DATA, length), *covered, sv))


def encode_interest(name: Sequence[Bytes], nonce: int | None, lifetime: int | None = 4000,
                    can_be_prefix: bool = False, must_be_fresh: bool = False,
                    hop_limit: int | None = None) -> bytes:
    """An Interest without ApplicationParameters, signature or ForwardingHint, in
    ``make_interest``'s element order and integer widths (Nonce 4 bytes, HopLimit 1).
    ValueError where make_interest raises too (a component of type 0 or a
    ParametersSha256DigestComponent, a nonce or hop limit out of range); TypeError for
    components that are not bytes-like."""
    for comp in name:
        if not comp or comp[0] in INVALID_INTEREST_COMPONENT:
            raise ValueError("component make_interest refuses without ApplicationParameters")
    if nonce is not None and not 0 <= nonce <= 0xFFFFFFFF:
        raise ValueError("nonce out of range")
    if hop_limit is not None and not 0 <= hop_limit <= 0xFF:
        raise ValueError("hop limit out of range")
    name_el = encode_name(name)
    parts = [name_el]
    if can_be_prefix:
        parts.append(_CAN_BE_PREFIX_EL)
    if must_be_fresh:
        parts.append(_MUST_BE_FRESH_EL)
    if nonce is not None:
        parts.append(b"\x0a\x04" + nonce.to_bytes(4, "big"))
    if lifetime is not None:
        parts.append(nonneg_element(INTEREST_LIFETIME, lifetime))
    if hop_limit is not None:
        parts.append(bytes((HOP_LIMIT, 1, hop_limit)))
    body = b"".join(parts)
    return tl(INTEREST, len(body)) + body


# ---- what the apps send: Interests with ApplicationParameters, signed or not, hinted --------
#
# NDN packet format v0.3: the name ends with a ParametersSha256DigestComponent, the SHA-256 of
# every element from ApplicationParameters to the end; a signed Interest's InterestSignature
# Value covers the name's other components, ApplicationParameters and InterestSignatureInfo.
# Byte-identical to python-ndn's make_interest (tests/unit/test_wire.py).

SIGNATURE_NONCE: Final = 0x26
SIGNATURE_TIME: Final = 0x28
_PARAMS_DIGEST_HEAD: Final = bytes((PARAMS_DIGEST, 32))


def encode_interest_signature_info(signature_type: int,
                                   key_name: Sequence[Bytes] | None = None,
                                   nonce: bytes | None = None,
                                   time_ms: int | None = None) -> bytes:
    """InterestSignatureInfo: SignatureType, a KeyLocator Name, SignatureNonce and
    SignatureTime (ms since the epoch) as a command's replay protection wants them."""
    value = bytes((SIGNATURE_TYPE, 1, signature_type))
    if key_name is not None:
        kl = encode_name(key_name)
        value += tl(KEY_LOCATOR, len(kl)) + kl
    if nonce is not None:
        value += tl(SIGNATURE_NONCE, len(nonce)) + nonce
    if time_ms is not None:
        value += nonneg_element(SIGNATURE_TIME, time_ms)
    return tl(INTEREST_SIGNATURE_INFO, len(value)) + value


def encode_interest_full(
        name: Sequence[Bytes], app_parameters: Bytes | None, nonce: int | None,
        lifetime: int | None = 4000, can_be_prefix: bool = False, must_be_fresh: bool = False,
        hop_limit: int | None = None, signature_info: bytes | None = None,
        sign: SignFn | None = None, forwarding_hint: Sequence[Sequence[Bytes]] = ()
) -> tuple[bytes, bytes]:
    """Any Interest the apps send: with ApplicationParameters (signed when `signature_info`,
    an InterestSignatureInfo element, and `sign` are given) and/or a ForwardingHint (its
    names as encoded components).  Returns its wire and its ParametersSha256Digest
    Component, which ends its name and its Data's (b"" without parameters).  ValueError for
    a component of type 0 or a digest component in `name` (computed, not given)."""
    for comp in name:
        if not comp or comp[0] in INVALID_INTEREST_COMPONENT:
            raise ValueError("component make_interest refuses (type 0, or a parameters digest)")
    if nonce is not None and not 0 <= nonce <= 0xFFFFFFFF:
        raise ValueError("nonce out of range")
    if hop_limit is not None and not 0 <= hop_limit <= 0xFF:
        raise ValueError("hop limit out of range")
    tail = digest = b""
    if app_parameters is not None:
        params = tl(APP_PARAMETERS, len(app_parameters)) + bytes(app_parameters)
        signed: list[Bytes] = [params]
        if signature_info is not None and sign is not None:
            value = sign([b"".join(name), params, signature_info])
            signed += [signature_info, tl(INTEREST_SIGNATURE_VALUE, len(value)), value]
        tail = b"".join(signed)
        digest = _PARAMS_DIGEST_HEAD + hashlib.sha256(tail).digest()
    name_value = b"".join(name) + digest
    parts: list[Bytes] = [tl(NAME, len(name_value)), name_value]
    if can_be_prefix:
        parts.append(_CAN_BE_PREFIX_EL)
    if must_be_fresh:
        parts.append(_MUST_BE_FRESH_EL)
    if forwarding_hint:
        hint = b"".join(encode_name(n) for n in forwarding_hint)
        parts.append(tl(FORWARDING_HINT, len(hint)) + hint)
    if nonce is not None:
        parts.append(b"\x0a\x04" + nonce.to_bytes(4, "big"))
    if lifetime is not None:
        parts.append(nonneg_element(INTEREST_LIFETIME, lifetime))
    if hop_limit is not None:
        parts.append(bytes((HOP_LIMIT, 1, hop_limit)))
    parts.append(tail)
    body = b"".join(parts)
    return tl(INTEREST, len(body)) + body, digest
