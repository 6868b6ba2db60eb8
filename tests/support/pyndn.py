"""python-ndn as the outside client the interop tests compare with: its HMAC-SHA256 signer in
ndnps's argument order (``HmacSigner(key, key_name)``), so a test builds with python-ndn's
``make_data``/``make_interest`` what ndnps builds with ``ndnps.client.security.HmacSigner``."""
from __future__ import annotations

from ndn.security import HmacSha256Signer


class HmacSigner(HmacSha256Signer):
    """python-ndn's HmacSha256Signer: SignatureType 4 and a KeyLocator naming the key."""

    def __init__(self, key: bytes, key_name) -> None:
        super().__init__(key_name, key)
