"""ndnps.exchanges.transport.publisher: versions signed by the owner's callable, kept for probes
(the last few), answered by segment and counted; any producer's names."""
from __future__ import annotations

from ndnps.exchanges.transport.publisher import Publisher


def signer(producer: str):
    """A fake `sign`: one 'wire' per 4 bytes of the blob, naming the producer and version."""
    signed = []

    def sign(version: int, blob: bytes) -> list[bytes]:
        signed.append(version)
        return [f"{producer}/{version}/{i}:".encode() + blob[i:i + 4]
                for i in range(0, len(blob), 4)]
    return sign, signed


def test_publish_signs_keeps_and_returns_what_to_push():
    sign, signed = signer("ps")
    pub = Publisher(sign, keep_versions=2)
    wires = pub.publish(1, b"abcdefgh")
    assert wires == [b"ps/1/0:abcd", b"ps/1/4:efgh"] and signed == [1]
    assert pub.get(1) == wires and pub.probes_answered == 0


def test_probes_are_answered_for_kept_versions_only_and_counted():
    sign, _ = signer("ps")
    pub = Publisher(sign, keep_versions=2)
    for v in (1, 2, 3):
        pub.publish(v, b"abcdefgh")
    assert pub.answer(1, 0) is None                # evicted: keep_versions = 2
    assert pub.answer(4, 0) is None                # not produced yet
    assert pub.answer(3, 2) is None                # beyond its last segment
    assert pub.probes_answered == 0
    assert pub.answer(3, 1) == b"ps/3/4:efgh" and pub.answer(2, 0) == b"ps/2/0:abcd"
    assert pub.probes_answered == 2


def test_a_version_published_again_replaces_its_segments():
    sign, _ = signer("ps")
    pub = Publisher(sign, keep_versions=2)
    pub.publish(1, b"abcd")
    pub.publish(1, b"wxyz")
    assert pub.get(1) == [b"ps/1/0:wxyz"]


def test_one_publisher_per_producer_each_with_its_own_names():
    """Nothing in a Publisher names its producer: a peer-to-peer worker can run its own."""
    a, b = Publisher(signer("w1")[0], 4), Publisher(signer("w2")[0], 4)
    a.publish(5, b"1234")
    b.publish(5, b"5678")
    assert a.answer(5, 0) == b"w1/5/0:1234" and b.answer(5, 0) == b"w2/5/0:5678"
