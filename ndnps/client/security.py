"""Data signatures for a training: HMAC-SHA256 under the training's key, or DigestSha256 when
no key is configured; the matching checks for the receiver.

Per-packet module (typed; compilable with mypyc).  The signers hash with ``hashlib``/``hmac``
(python-ndn's hash through pycryptodome, ~6x slower on this kind of machine: docs/design.md,
python-ndn).  A signer hands the fixed-shape encoders (``ndnps.ndn.encoders``) its SignatureInfo
element, encoded once, and signs the covered blocks.  The check reads the signed portion and
the SignatureValue off the received packet as parsed (``ndnps.client.wire.Data``: slices of
the bytes that arrived, nothing re-encoded).  A receiver that has a key accepts only HMAC
signatures under that key: a DigestSha256 Data (which anyone can make) is a forgery there.
"""
from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING, Callable, Final, Protocol, Sequence

from ndnps.ndn.encoders import Bytes, encode_signature_info

from .signer import Signer

if TYPE_CHECKING:                        # (wire knows signers by .signer's Protocol alone)
    from .wire import Data

# SignatureType values (NDN packet format v0.3)
DIGEST_SHA256: Final = 0
HMAC_WITH_SHA256: Final = 4

# A validator decides whether a received Data answers an Interest: True accepts it; False
# (or an exception) makes the Interest end in ValidationFailure.  Synchronous: the Data's
# future is settled in the read that brought it.
Validator = Callable[["Data"], bool]


def pass_all(_data: "Data") -> bool:
    """The validator that accepts every Data (management answers, interop tests)."""
    return True


class _Hash(Protocol):
    """hashlib's and hmac's objects, as used here: a keyed or plain start, copied per packet."""

    def copy(self) -> "_Hash": ...

    def update(self, data: Bytes, /) -> None: ...

    def digest(self) -> bytes: ...


class DigestSigner:
    """DigestSha256: integrity only."""

    signature_type = DIGEST_SHA256
    key_name: list[bytes] | None = None
    signature_info = encode_signature_info(DIGEST_SHA256)

    def sign(self, blocks: Sequence[Bytes]) -> bytes:
        h = hashlib.sha256()
        for blk in blocks:
            h.update(blk)
        return h.digest()


class HmacSigner:
    """HMAC-SHA256 with a KeyLocator naming the key (`key_name`: encoded components)."""

    signature_type = HMAC_WITH_SHA256

    def __init__(self, key: bytes, key_name: Sequence[Bytes]) -> None:
        self._base = hmac.new(key, digestmod=hashlib.sha256)   # copied per packet: no re-keying
        self.key_name: list[bytes] | None = [bytes(c) for c in key_name]
        self.signature_info = encode_signature_info(HMAC_WITH_SHA256, self.key_name)

    def sign(self, blocks: Sequence[Bytes]) -> bytes:
        h = self._base.copy()
        for blk in blocks:
            h.update(blk)
        return h.digest()


class Security:
    """The signer and the check of one training: ``Security(key, key_name)``; key None or
    empty means DigestSha256."""

    def __init__(self, key: bytes | None, key_name: Sequence[Bytes]) -> None:
        self.key = key or None
        self.signer: Signer
        self._base: _Hash
        if self.key:
            self.signer = HmacSigner(self.key, key_name)
            self._base = hmac.new(self.key, digestmod=hashlib.sha256)
            self._type = HMAC_WITH_SHA256
        else:
            self.signer = DigestSigner()
            self._base = hashlib.sha256()
            self._type = DIGEST_SHA256

    @property
    def kind(self) -> str:
        return "hmac-sha256" if self.key else "digest-sha256"

    def verify(self, data: "Data") -> bool:
        """True when the Data carries our signature type and a correct value over its signed
        portion (read in place)."""
        if data.signature_type != self._type or data.value_end - data.value_start != 32:
            return False
        h = self._base.copy()
        h.update(memoryview(data.buf)[data.signed_start:data.signed_end])
        return hmac.compare_digest(h.digest(), data.buf[data.value_start:data.value_end])

    def validator(self, data: "Data") -> bool:
        """A Validator (``app.express(name, sec.validator)``): ``verify``."""
        return self.verify(data)
