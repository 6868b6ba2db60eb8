"""What a PS-less peer serves (ndnps/apps/common/published.py): signed objects by key, version
first; an Interest for one not published yet is held until it is, one for a forgotten version or
past an object's end is counted and dropped, a second answer to the same segment is counted, and
every Data sent is reported with its size."""
from __future__ import annotations

from typing import Callable

from ndnps.apps.common.published import Published
from ndnps.client.pending import HeldInterests

FAR = 10**15                    # a deadline no clock reaches (ms)
PART = (4, True, 0, 1, 2)      # a part's key: (version, reduce, set, level, part)


class Clock:
    """A millisecond clock the test moves."""

    def __init__(self, now: int = 1000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def collect() -> tuple[list[bytes], Callable[[bytes], None]]:
    got: list[bytes] = []
    return got, got.append


def published(keep: int = 3, clock: Clock | None = None) -> tuple[Published, list]:
    sent: list[tuple[tuple, int]] = []
    pub = Published(keep=keep, on_sent=lambda key, n: sent.append((key, n)))
    if clock is not None:
        pub.held = HeldInterests(clock=clock)
    return pub, sent


def test_a_published_object_answers_each_segment_at_once():
    pub, sent = published()
    pub.publish(PART, [b"seg0", b"segment1"])
    got, reply = collect()
    pub.ask(PART, 1, reply, FAR)
    pub.ask(PART, 0, reply, FAR)
    assert got == [b"segment1", b"seg0"]
    assert sent == [(PART, 8), (PART, 4)]
    assert (pub.unknown, pub.repeated, len(pub.held)) == (0, 0, 0)
    assert pub.newest == 4


def test_an_interest_before_the_object_is_held_and_publishing_answers_it():
    pub, sent = published()
    got, reply = collect()
    other, reply_other = collect()
    pub.ask(PART, 0, reply, FAR)
    pub.ask(PART, 1, reply, FAR)
    pub.ask((4, "gradient"), 0, reply_other, FAR)           # another object of the version
    assert got == [] and len(pub.held) == 3 and sent == []
    pub.publish(PART, [b"a", b"bb"])
    assert sorted(got) == [b"a", b"bb"]
    assert sorted(sent) == [(PART, 1), (PART, 2)]
    assert other == [] and len(pub.held) == 1               # still waiting for its own
    pub.publish((4, "gradient"), [b"g"])
    assert other == [b"g"] and len(pub.held) == 0
    assert pub.unknown == 0 and pub.repeated == 0


def test_a_re_expressed_interest_held_twice_gets_both_answers():
    """Each held Interest has its own PIT token downstream: each is answered, the second
    counted as a repeated answer."""
    pub, sent = published()
    got, reply = collect()
    pub.ask(PART, 0, reply, FAR)
    pub.ask(PART, 0, reply, FAR)
    pub.publish(PART, [b"x"])
    assert got == [b"x", b"x"] and len(sent) == 2 and pub.repeated == 1


def test_a_segment_past_the_end_is_unknown():
    pub, sent = published()
    pub.publish(PART, [b"only"])
    got, reply = collect()
    pub.ask(PART, 1, reply, FAR)
    pub.ask(PART, 7, reply, FAR)
    assert got == [] and sent == [] and pub.unknown == 2 and len(pub.held) == 0


def test_a_forgotten_version_is_unknown_and_not_held():
    pub, sent = published(keep=3)
    for v in range(4):                      # 0..3: version 0 is past keep = 3
        pub.publish((v, "gradient"), [f"v{v}".encode()])
    assert sorted(k[0] for k in pub.objects) == [1, 2, 3]
    got, reply = collect()
    pub.ask((0, "gradient"), 0, reply, FAR)
    assert got == [] and pub.unknown == 1 and len(pub.held) == 0
    # a kept version is still answered; one not yet published within keep is held
    pub.ask((1, "gradient"), 0, reply, FAR)
    assert got == [b"v1"]
    pub.ask((1, "other"), 0, reply, FAR)
    assert len(pub.held) == 1 and pub.unknown == 1
    # a newer version moves the window: version 1 goes in turn
    pub.publish((4, "gradient"), [b"v4"])
    assert sorted(k[0] for k in pub.objects) == [2, 3, 4]
    pub.ask((1, "gradient"), 0, reply, FAR)
    assert got == [b"v1"] and pub.unknown == 2


def test_answering_a_segment_again_is_counted_repeated():
    pub, sent = published()
    pub.publish(PART, [b"p0", b"p1"])
    got, reply = collect()
    pub.ask(PART, 0, reply, FAR)
    pub.ask(PART, 1, reply, FAR)
    assert pub.repeated == 0
    pub.ask(PART, 0, reply, FAR)                     # a re-expressed Interest reached us
    pub.ask(PART, 0, reply, FAR)
    assert got == [b"p0", b"p1", b"p0", b"p0"] and pub.repeated == 2
    assert [n for _, n in sent] == [2, 2, 2, 2]      # every Data sent is reported


def test_a_held_answer_then_an_asked_one_is_repeated():
    pub, _ = published()
    got, reply = collect()
    pub.ask(PART, 0, reply, FAR)
    pub.publish(PART, [b"x"])
    pub.ask(PART, 0, reply, FAR)
    assert got == [b"x", b"x"] and pub.repeated == 1


def test_on_sent_gets_every_datas_size_by_key():
    pub, sent = published()
    grad = (2, "gradient")
    pub.publish(grad, [b"1" * 10, b"2" * 20, b"3" * 5])
    pub.publish(PART, [b"4" * 7])
    got, reply = collect()
    for seg in range(3):
        pub.ask(grad, seg, reply, FAR)
    pub.ask(PART, 0, reply, FAR)
    assert sent == [(grad, 10), (grad, 20), (grad, 5), (PART, 7)]
    assert sum(n for _, n in sent) == sum(map(len, got))


def test_held_interests_past_their_deadline_are_not_answered():
    clock = Clock(1000)
    pub, sent = published(clock=clock)
    late, reply_late = collect()
    live, reply_live = collect()
    pub.ask(PART, 0, reply_late, 1500)           # its lifetime ends at 1500 ms
    pub.ask(PART, 0, reply_live, 5000)
    clock.now = 2000
    pub.publish(PART, [b"x"])
    assert late == [] and live == [b"x"]
    assert sent == [(PART, 1)] and pub.repeated == 0
    assert pub.held.expired == 1 and len(pub.held) == 0


def test_a_newer_version_purges_held_interests_whose_lifetime_is_over():
    clock = Clock(1000)
    pub, sent = published(clock=clock)
    got, reply = collect()
    pub.ask((5, "gradient"), 0, reply, 1200)         # never published
    pub.ask((6, "gradient"), 0, reply, 9000)
    assert len(pub.held) == 2
    clock.now = 3000
    pub.publish((1, "gradient"), [b"x"])             # any publish purges the expired
    assert len(pub.held) == 1 and pub.held.expired == 1
    pub.publish((6, "gradient"), [b"six"])
    assert got == [b"six"] and len(pub.held) == 0 and sent == [((6, "gradient"), 3)]
