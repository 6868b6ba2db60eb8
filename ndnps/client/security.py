"""Data signatures for a training: HMAC-SHA256 under the training's key, or DigestSha256 when
no key is configured; the matching checks for the receiver.

python-ndn's own signers hash through pycryptodome, ~6x slower than hashlib on this kind of
machine (DESIGN.md, known pitfalls), so these implement python-ndn's ``Signer`` interface on
``hashlib``/``hmac``.  A receiver that has a key accepts only HMAC signatures under that key: a
DigestSha256 Data (which anyone can make) is a forgery there.
"""
from __future__ import annotations

import hashlib
import hmac
from typing import Protocol, Sequence

from ndn.encoding import FormalName, KeyLocator, Name, SignaturePtrs, SignatureType, Signer
from ndn.types import ValidResult

from ndnps.ndn.packet import encode_signature_info


class _Hash(Protocol):
    """hashlib's and hmac's objects, as used here: a keyed or plain start, copied per packet."""

    def copy(self) -> "_Hash": ...

    def update(self, data: bytes, /) -> None: ...

    def digest(self) -> bytes: ...


class DigestSigner(Signer):
    """DigestSha256: integrity only.  ``signature_info`` and ``sign`` serve the fixed-shape
    encoder (``ndnps.ndn.packet.encode_data``), the rest python-ndn's ``make_data``."""

    signature_info = encode_signature_info(SignatureType.DIGEST_SHA256)

    def sign(self, blocks: Sequence[bytes | memoryview]) -> bytes:
        h = hashlib.sha256()
        for blk in blocks:
            h.update(blk)
        return h.digest()

    def write_signature_info(self, signature_info) -> None:
        signature_info.signature_type = SignatureType.DIGEST_SHA256
        signature_info.key_locator = None

    def get_signature_value_size(self) -> int:
        return 32

    def write_signature_value(self, wire, contents) -> int:
        wire[:] = self.sign(contents)
        return 32


class HmacSigner(Signer):
    """HMAC-SHA256 with a KeyLocator naming the key."""

    def __init__(self, key: bytes, key_name: FormalName) -> None:
        self._base = hmac.new(key, digestmod=hashlib.sha256)   # copied per packet: no re-keying
        self.key_name = key_name
        self.signature_info = encode_signature_info(SignatureType.HMAC_WITH_SHA256,
                                                    [bytes(c) for c in Name.normalize(key_name)])

    def sign(self, blocks: Sequence[bytes | memoryview]) -> bytes:
        h = self._base.copy()
        for blk in blocks:
            h.update(blk)
        return h.digest()

    def write_signature_info(self, signature_info) -> None:
        signature_info.signature_type = SignatureType.HMAC_WITH_SHA256
        signature_info.key_locator = KeyLocator()
        signature_info.key_locator.name = self.key_name

    def get_signature_value_size(self) -> int:
        return 32

    def write_signature_value(self, wire, contents) -> int:
        wire[:] = self.sign(contents)
        return 32


class Security:
    """The signer and the check of one training: ``Security(key, key_name)``; key None or
    empty means DigestSha256."""

    def __init__(self, key: bytes | None, key_name: FormalName) -> None:
        self.key = key or None
        if self.key:
            self.signer: Signer = HmacSigner(self.key, key_name)
            self._base: _Hash = hmac.new(self.key, digestmod=hashlib.sha256)
            self._type = SignatureType.HMAC_WITH_SHA256
        else:
            self.signer = DigestSigner()
            self._base = hashlib.sha256()
            self._type = SignatureType.DIGEST_SHA256

    @property
    def kind(self) -> str:
        return "hmac-sha256" if self.key else "digest-sha256"

    def verify(self, sig: SignaturePtrs) -> bool:
        """True when the packet carries our signature type and a correct value."""
        info = sig.signature_info
        if info is None or info.signature_type != self._type:
            return False
        value = sig.signature_value_buf
        covered = sig.signature_covered_part
        if not covered or value is None or len(value) != 32:
            return False
        h = self._base.copy()
        for blk in covered:
            h.update(blk)
        return hmac.compare_digest(h.digest(), bytes(value))

    async def validator(self, _name: FormalName, sig: SignaturePtrs, _context=None) -> ValidResult:
        """python-ndn's Validator interface (``app.express(..., validator=sec.validator)``)."""
        return ValidResult.PASS if self.verify(sig) else ValidResult.FAIL
