"""ndnps.client.security: our hashlib signers interoperate with python-ndn's checks, and a receiver with
a key accepts nothing but HMAC under that key."""
from __future__ import annotations

import pytest
from ndn.appv2 import NDNApp
from ndn.encoding import MetaInfo, SignatureType, make_data, parse_data
from ndn.security import DigestSha256Signer, HmacSha256Signer
from ndn.security.validator.digest_validator import sha256_digest_checker
from ndn.security.validator.known_key_validator import verify_hmac
from ndn.types import ValidResult

from ndnps.protocol import names
from ndnps.client.security import DigestSigner, HmacSigner, Security
from ndnps.ndn.conventions import segment_component

KEY = b"training-key"
KEY_NAME = names.key("ps", "t1")
NAME = names.distribute("ps", "t1", 3, 0)


def sig_of(wire):
    return parse_data(wire)[3]


def data(signer, content=b"x" * 8000):
    return bytes(make_data(NAME, MetaInfo(final_block_id=segment_component(0)), content,
                           signer=signer))


def test_hmac_round_trip_and_key_locator():
    sec = Security(KEY, KEY_NAME)
    wire = data(sec.signer)
    sig = sig_of(wire)
    assert sig.signature_info.signature_type == SignatureType.HMAC_WITH_SHA256
    assert list(sig.signature_info.key_locator.name) == KEY_NAME
    assert sec.verify(sig)
    assert sec.kind == "hmac-sha256"


def test_interoperates_with_python_ndn():
    # our signatures check with python-ndn's verifiers, and python-ndn's with ours
    assert verify_hmac(KEY, sig_of(data(HmacSigner(KEY, KEY_NAME))))
    assert Security(KEY, KEY_NAME).verify(sig_of(data(HmacSha256Signer(KEY_NAME, KEY))))
    assert Security(None, KEY_NAME).verify(sig_of(data(DigestSha256Signer())))


@pytest.mark.asyncio
async def test_digest_interoperates_with_python_ndn():
    assert await sha256_digest_checker(NAME, sig_of(data(DigestSigner())))


@pytest.mark.parametrize("signer", [HmacSigner(b"another key", KEY_NAME), DigestSigner(), None])
def test_with_a_key_only_our_hmac_passes(signer):
    assert not Security(KEY, KEY_NAME).verify(sig_of(data(signer)))


def test_without_a_key_only_digest_passes():
    sec = Security(None, KEY_NAME)
    assert sec.kind == "digest-sha256"
    assert sec.verify(sig_of(data(DigestSigner())))
    assert not sec.verify(sig_of(data(HmacSigner(KEY, KEY_NAME))))


@pytest.mark.parametrize("key", [KEY, None])
def test_any_flipped_byte_fails(key):
    sec = Security(key, KEY_NAME)
    wire = bytearray(data(sec.signer, b"abcdefgh" * 100))
    for pos in (len(wire) // 2, len(wire) - 1, 20):
        bad = bytearray(wire)
        bad[pos] ^= 0x01
        try:
            sig = sig_of(bytes(bad))
        except Exception:                   # the flip broke the TLV: also never accepted
            continue
        assert not sec.verify(sig)


@pytest.mark.asyncio
async def test_validator_interface():
    sec = Security(KEY, KEY_NAME)
    good, bad = sig_of(data(sec.signer)), sig_of(data(DigestSigner()))
    assert await sec.validator(NAME, good, {}) == ValidResult.PASS
    assert await sec.validator(NAME, bad, {}) == ValidResult.FAIL


def test_app_make_data_accepts_our_signer():
    wire = NDNApp.make_data(NAME, b"", signer=Security(KEY, KEY_NAME).signer, freshness_period=10)
    assert Security(KEY, KEY_NAME).verify(sig_of(bytes(wire)))
