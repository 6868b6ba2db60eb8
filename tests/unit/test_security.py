"""ndnps.client.security: our hashlib signers interoperate with python-ndn's checks, the check
reads the signed portion off the packet as parsed, and a receiver with a key accepts nothing but
HMAC under that key."""
from __future__ import annotations

import pytest
from ndn.encoding import MetaInfo, SignatureType, make_data, parse_data
from ndn.security import DigestSha256Signer, HmacSha256Signer
from ndn.security.validator.digest_validator import sha256_digest_checker
from ndn.security.validator.known_key_validator import verify_hmac

from ndnps.client import wire
from ndnps.client.app import App
from ndnps.client.security import DigestSigner, HmacSigner, Security, pass_all
from ndnps.ndn.conventions import segment_component
from ndnps.protocol import names

KEY = b"training-key"
KEY_NAME = names.key("ps", "t1")
NAME = names.distribute("ps", "t1", 3, 0)


def ours(signer, content=b"x" * 8000) -> bytes:
    return wire.make_data(NAME, content, signer, final_block_id=segment_component(0))


def theirs(signer, content=b"x" * 8000) -> bytes:
    return bytes(make_data(NAME, MetaInfo(final_block_id=segment_component(0)), content,
                           signer=signer))


def test_hmac_round_trip_and_key_locator():
    sec = Security(KEY, KEY_NAME)
    raw = ours(sec.signer)
    data = wire.parse_data(raw)
    assert data.signature_type == SignatureType.HMAC_WITH_SHA256
    assert wire.components(data.key_locator) == KEY_NAME
    assert sec.verify(data) and sec.validator(data)
    assert sec.kind == "hmac-sha256"
    # the check runs over the received bytes as parsed: the signed portion is a view of them
    assert data.covered.obj is raw
    assert bytes(data.covered) == raw[4:raw.index(b"\x17\x20")]


def test_interoperates_with_python_ndn():
    # python-ndn's signers write our bytes; our signatures check with python-ndn's verifiers,
    # and python-ndn's with ours
    assert theirs(HmacSha256Signer(KEY_NAME, KEY)) == ours(HmacSigner(KEY, KEY_NAME))
    assert theirs(DigestSha256Signer()) == ours(DigestSigner())
    assert verify_hmac(KEY, parse_data(ours(HmacSigner(KEY, KEY_NAME)))[3])
    assert Security(KEY, KEY_NAME).verify(wire.parse_data(theirs(HmacSha256Signer(KEY_NAME, KEY))))
    assert Security(None, KEY_NAME).verify(wire.parse_data(theirs(DigestSha256Signer())))


@pytest.mark.asyncio
async def test_digest_interoperates_with_python_ndn():
    assert await sha256_digest_checker(NAME, parse_data(ours(DigestSigner()))[3])


@pytest.mark.parametrize("raw", [ours(HmacSigner(b"another key", KEY_NAME)), ours(DigestSigner()),
                                 theirs(None)], ids=["other key", "digest", "unsigned"])
def test_with_a_key_only_our_hmac_passes(raw):
    assert not Security(KEY, KEY_NAME).verify(wire.parse_data(raw))


def test_without_a_key_only_digest_passes():
    sec = Security(None, KEY_NAME)
    assert sec.kind == "digest-sha256"
    assert sec.verify(wire.parse_data(ours(DigestSigner())))
    assert not sec.verify(wire.parse_data(ours(HmacSigner(KEY, KEY_NAME))))


@pytest.mark.parametrize("key", [KEY, None])
def test_any_flipped_byte_fails(key):
    sec = Security(key, KEY_NAME)
    raw = bytearray(ours(sec.signer, b"abcdefgh" * 100))
    for pos in (len(raw) // 2, len(raw) - 1, 20):
        bad = bytearray(raw)
        bad[pos] ^= 0x01
        try:
            data = wire.parse_data(bytes(bad))
        except ValueError:                  # the flip broke the TLV: also never accepted
            continue
        assert not sec.verify(data)


def test_a_validator_that_raises_or_refuses_and_pass_all():
    data = wire.parse_data(ours(DigestSigner()))
    assert pass_all(data)
    assert not Security(KEY, KEY_NAME).validator(data)


def test_app_make_data_takes_our_signer():
    raw = App.make_data(NAME, b"", Security(KEY, KEY_NAME).signer, freshness_period=10)
    data = wire.parse_data(raw)
    assert Security(KEY, KEY_NAME).verify(data) and data.freshness_period == 10
