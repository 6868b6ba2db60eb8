"""What the packet encoders need of a signer (ndnps.client.wire): the Protocol the signers of
ndnps.client.security keep. On its own, below both: the wire encodes with any signer, and the
signers' checks read the wire's parsed Data."""
from __future__ import annotations

from typing import Protocol, Sequence

from ndnps.ndn.encoders import Bytes


class Signer(Protocol):
    """What the encoders need of a signer: its SignatureType, its KeyLocator name (encoded
    components, or None), the Data SignatureInfo element, and the signature of the covered
    blocks."""
    signature_type: int
    key_name: list[bytes] | None
    signature_info: bytes

    def sign(self, blocks: Sequence[Bytes]) -> bytes: ...
