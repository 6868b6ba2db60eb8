"""The forwarder's `*aggregate*` stage (ndnps/forwarder/aggregator.py) through the pipelines, on a
fake clock: members' collects expressed, contributions checked and summed, one signed sum
answered; collisions, forgeries, sub-group fallback, deadlines, retransmissions, pushes."""
from __future__ import annotations

import asyncio
import hashlib

import numpy as np
import pytest
from ndn.app_support.nfd_mgmt import parse_response
from ndn.encoding import (Component, InterestParam, MetaInfo, Name, make_data, make_interest,
                          parse_data)
from ndn.security import DigestSha256Signer

from ndnps.forwarder.mgmt import Management
from tests.support.pyndn import HmacSigner
from ndnps.ndn import summable
from ndnps.ndn.aggregation import (AggregatorConfig, Group, application_parameters,
                                   decode_plan, encode_interest, encode_plan, signed_parameters,
                                   signed_plan, verified_content)
from ndnps.ndn.packet import NACK_CONGESTION, NACK_NO_ROUTE, decode_interest
from ndnps.ndn.tlv import encode_tlv

from tests.support.fwkit import Bench, data, nack, nv, parse_out

KEY = b"k" * 32
KEY_NAME = Name.from_str("/ps/t/KEY")
TRAINING = nv("/ps/t")
KN = nv("/ps/t/KEY")


def agg_name(version: int, seg: int) -> bytes:
    return nv("/*aggregate*/ps/t") + bytes(Component.from_version(version)) + \
        bytes(Component.from_segment(seg))


def ask(b: Bench, face: int, plan: Group, version: int = 3, seg: int = 1) -> tuple[list, str]:
    wire, full = encode_interest(agg_name(version, seg), encode_plan(plan), plan.at, 4000,
                                 KEY, KN)
    return ([(f, parse_out(w)) for f, w in b.fw.on_receive(face, wire)],
            Name.to_str(Name.from_bytes(encode_tlv(7, full))))


def exact_sum(values: list[float]) -> bytes:
    """The exact partial sum of one float32 value per worker (summable.EXACT)."""
    acc = summable.FixedPointSum(1)
    for v in values:
        acc.add(summable.encode(np.array([v])))
    return acc.result(exact=True)


def contribution(worker: str, values, version: int = 3, seg: int = 1, key: bytes = KEY,
                 contributors: int = 1) -> bytes:
    name = Name.from_str(f"/{worker}/ps/t") + [Component.from_version(version),
                                               Component.from_segment(seg)]
    return bytes(make_data(name, MetaInfo(), summable.encode(np.array(values), contributors),
                           signer=HmacSigner(key, KEY_NAME)))


@pytest.fixture
def b() -> Bench:
    b = Bench()
    b.fw.configure_aggregator(AggregatorConfig(TRAINING, "agg", KEY, KN, slots=4, timeout=1.0))
    return b


def setup(b: Bench, workers=("w1", "w2")) -> tuple[int, dict[str, int]]:
    ps = b.face()
    faces = {}
    for w in workers:
        faces[w] = b.face()
        b.route(f"/{w}", faces[w])
    return ps, faces


def test_members_are_collected_and_one_signed_sum_answers(b):
    ps, f = setup(b)
    out, full = ask(b, ps, Group("agg", ("w1", "w2")))
    assert sorted((face, p.kind, p.name) for face, p in out) == [
        (f["w1"], "I", "/w1/ps/t/v=3/seg=1"), (f["w2"], "I", "/w2/ps/t/v=3/seg=1")]
    assert b.rx(f["w1"], contribution("w1", [1.0, 2.0])) == []
    (face, sent), = b.rx(f["w2"], contribution("w2", [0.5, -4.0]))
    assert (face, sent.kind, sent.name) == (ps, "D", full)
    content = verified_content(sent.net, KEY)
    assert content is not None and verified_content(sent.net, b"x" * 32) is None
    values, contributors = summable.decode(content)
    assert contributors == 2 and values.tolist() == [1.5, -2.0]
    c = b.fw.aggregation.counters
    assert (c.interests, c.answered, c.member_interests, c.rejected) == (1, 1, 2, 0)
    assert len(b.fw.aggregation.pool) == 0       # the slot is free
    # a retransmission of the finished aggregate: the Content Store answers it
    wire, _ = encode_interest(agg_name(3, 1), encode_plan(Group("agg", ("w1", "w2"))), "agg",
                              4000, KEY, KN)
    assert [(f2, p.kind) for f2, p in b.rx(ps, wire)] == [(ps, "D")]


def test_a_forgery_is_rejected_and_the_deadline_nacks(b):
    ps, f = setup(b)
    ask(b, ps, Group("agg", ("w1", "w2")))
    b.rx(f["w1"], contribution("w1", [1.0], key=b"z" * 32))          # wrong key
    b.rx(f["w2"], contribution("w2", [1.0]))
    assert b.fw.aggregation.counters.rejected == 1
    b.later(1.5)
    (face, sent), = [(x, parse_out(w)) for x, w in b.fw.tick()]
    assert (face, sent.kind, sent.reason) == (ps, "N", NACK_CONGESTION)
    assert b.fw.aggregation.counters.abandoned == 1
    # the worker's real answer, too late: ignored
    b.rx(f["w1"], contribution("w1", [1.0]))


def test_a_busy_slot_nacks_at_once(b):
    b.fw.configure_aggregator(AggregatorConfig(TRAINING, "agg", KEY, KN, slots=1))
    ps, f = setup(b)
    ask(b, ps, Group("agg", ("w1", "w2")), seg=1)
    out, _ = ask(b, ps, Group("agg", ("w1", "w2")), seg=2)
    assert [(x, p.kind, p.reason) for x, p in out] == [(ps, "N", NACK_CONGESTION)]
    pool = b.fw.aggregation.pool
    assert b.fw.aggregation.counters.collisions == 1 and pool.counters.collisions == 1


def test_a_retransmission_reexpresses_only_the_missing(b):
    ps, f = setup(b)
    ask(b, ps, Group("agg", ("w1", "w2")))
    b.rx(f["w1"], contribution("w1", [1.0]))
    b.later(0.3)
    out, _ = ask(b, ps, Group("agg", ("w1", "w2")))
    assert [(x, p.name) for x, p in out] == [(f["w2"], "/w2/ps/t/v=3/seg=1")]


def test_a_sub_group_nacked_falls_back_to_its_workers():
    b = Bench()
    b.fw.configure_aggregator(AggregatorConfig(TRAINING, "edge", KEY, KN))
    ps, f = setup(b, ("w1", "w2", "w3"))
    down = b.face()
    b.route("/agg2", down)
    plan = Group("edge", ("w1", Group("agg2", ("w2", "w3"))))
    out, full = ask(b, ps, plan)
    sub = [(x, p) for x, p in out if x == down]
    assert len(sub) == 1 and sub[0][1].name.startswith("/%2Aaggregate%2A/ps/t/v=3/seg=1/")
    assert [x for x, p in out if x != down] == [f["w1"]]
    # the sub-aggregator is busy: its Nack makes this node collect w2 and w3 itself
    out = b.rx(down, nack(sub[0][1].net, NACK_CONGESTION))
    assert sorted(p.name for _, p in out) == ["/w2/ps/t/v=3/seg=1", "/w3/ps/t/v=3/seg=1"]
    assert b.fw.aggregation.counters.fallbacks == 1
    for w, v in (("w1", 1.0), ("w2", 2.0)):
        assert b.rx(f[w], contribution(w, [v])) == []
    (face, sent), = b.rx(f["w3"], contribution("w3", [4.0]))
    assert sent.name == full and summable.decode(verified_content(sent.net, KEY)) [0].tolist() \
        == [7.0]


def test_a_sub_groups_sum_counts_for_its_workers():
    b = Bench()
    b.fw.configure_aggregator(AggregatorConfig(TRAINING, "edge", KEY, KN))
    ps, f = setup(b, ("w1",))
    down = b.face()
    b.route("/agg2", down)
    out, full = ask(b, ps, Group("edge", ("w1", Group("agg2", ("w2", "w3")))))
    sub = next(p for x, p in out if x == down)
    # the sub-plan asks for an exact sum: this node adds it to others
    assert decode_plan(application_parameters(sub.net)) == Group("agg2", ("w2", "w3"), True)
    subname = Name.from_str(sub.name)
    partial = bytes(make_data(subname, MetaInfo(), exact_sum([1.0, 2.0]),
                              signer=HmacSigner(KEY, KEY_NAME)))
    wrong = bytes(make_data(subname, MetaInfo(), exact_sum([3.0]),
                            signer=HmacSigner(KEY, KEY_NAME)))
    rounded = bytes(make_data(subname, MetaInfo(), summable.encode(np.array([3.0]), 2),
                              signer=HmacSigner(KEY, KEY_NAME)))
    # says 1 contributor, stands for 2; a float32 partial sum (not exact)
    for n, bad in enumerate((wrong, rounded), 1):
        assert b.rx(down, bad) == []
        assert b.fw.aggregation.counters.rejected == n
        # it took the PIT entry: the member stays missing until the requester asks again
        b.later(0.2)
        out, _ = ask(b, ps, Group("edge", ("w1", Group("agg2", ("w2", "w3")))))
        assert sorted(x for x, _ in out) == sorted([down, f["w1"]])
    assert b.rx(down, partial) == []
    (_, sent), = b.rx(f["w1"], contribution("w1", [1.0]))
    values, contributors = summable.decode(verified_content(sent.net, KEY))
    assert (values.tolist(), contributors, sent.name) == ([4.0], 3, full)


def test_a_workers_nack_ends_the_sum(b):
    ps, f = setup(b)
    out, _ = ask(b, ps, Group("agg", ("w1", "w2")))
    w1 = next(p for x, p in out if x == f["w1"])
    out = b.rx(f["w1"], nack(w1.net, NACK_NO_ROUTE))
    assert [(x, p.kind) for x, p in out] == [(ps, "N")]
    assert len(b.fw.aggregation.pool) == 0


def test_a_push_frees_older_slots_and_plans_for_others_pass_through(b):
    ps, f = setup(b)
    ask(b, ps, Group("agg", ("w1", "w2")), version=3)
    up = b.face()
    b.fw.ppit.insert(nv("/ps/t"), 2, ps, b.now)
    out = b.rx(up, data(Name.to_str(Name.from_str("/*distribute*/ps/t") +
                                    [Component.from_version(4), Component.from_segment(0)])))
    assert len(b.fw.aggregation.pool) == 0
    # the unfinished sum of version 3 is Nacked: its requester falls back at once
    assert (ps, "N") in [(x, p.kind) for x, p in out]
    assert b.fw.aggregation.trainings[TRAINING].pending == {}
    # a plan at another node is forwarded by its hint, not summed here
    b.route("/other", up)
    out, _ = ask(b, ps, Group("other", ("w1",)))
    assert [(x, p.kind) for x, p in out] == [(up, "I")]


def test_management_configures_local_faces_only():
    b = Bench()
    mgmt = Management(b.fw)
    config = AggregatorConfig(TRAINING, "agg", KEY, KN, slots=8)

    def command(verb: str, value: bytes):
        name = Name.from_str(f"/localhost/nfd/aggregators/{verb}") + [
            Component.from_bytes(value)]
        wire = bytes(make_interest(name, InterestParam()))
        reply = asyncio.run(mgmt.handle(decode_interest(wire, 0, len(wire)), 300))
        return parse_response(bytes(parse_data(reply)[2]))["status_code"]

    assert command("add", b"\x01\x02") == 400
    assert command("add", config.encode()) == 200
    assert b.fw.aggregation.pool.slots == 8
    assert command("remove", encode_tlv(7, TRAINING)) == 200
    assert command("remove", encode_tlv(7, TRAINING)) == 404
    # /localhost never arrives from a non-local face: the pipelines drop it first
    far = b.face(local=False)
    name = Name.from_str("/localhost/nfd/aggregators/add") + [Component.from_bytes(config.encode())]
    assert b.raw(far, bytes(make_interest(name, InterestParam()))) == []
    assert b.drops(far) == {"localhost_scope": 1}


def test_a_slot_past_its_deadline_is_ended_when_another_segment_needs_it():
    # the tick has not swept it yet: the new segment takes it, the old Interest is Nacked and
    # nothing of the old sum is left behind
    b = Bench()
    b.fw.configure_aggregator(AggregatorConfig(TRAINING, "agg", KEY, KN, slots=1, timeout=1.0))
    ps, f = setup(b)
    ask(b, ps, Group("agg", ("w1", "w2")), seg=1)
    b.later(1.5)
    out, _ = ask(b, ps, Group("agg", ("w1", "w2")), seg=2)
    kinds = sorted((x, p.kind, p.name.split("/")[-1] if p.kind == "I" else p.reason)
                   for x, p in out)
    assert (ps, "N", NACK_CONGESTION) in kinds
    assert [p.name for x, p in out if p.kind == "I"] == ["/w1/ps/t/v=3/seg=2",
                                                         "/w2/ps/t/v=3/seg=2"]
    agg = b.fw.aggregation
    assert agg.counters.abandoned == 1 and len(agg.trainings[TRAINING].pending) == 1
    assert all(k.segment == 2 for k in agg.trainings[TRAINING].pending)
    assert len(agg._waiting) == 2


def test_identical_aggregates_from_two_requesters_merge_and_both_get_the_sum(b):
    # as any Interest in the PIT: one sum made, answered to both (an all-reduce's shape)
    ps, f = setup(b)
    other = b.face()
    out, full = ask(b, ps, Group("agg", ("w1", "w2")))
    assert len(out) == 2
    out, _ = ask(b, other, Group("agg", ("w1", "w2")))
    assert out == [] and b.fw.aggregation.counters.member_interests == 2
    b.rx(f["w1"], contribution("w1", [1.0]))
    sent = b.rx(f["w2"], contribution("w2", [2.0]))
    assert sorted((x, p.kind, p.name) for x, p in sent) == [(ps, "D", full), (other, "D", full)]
    assert b.fw.aggregation.counters.answered == 1


def test_a_retransmission_after_the_pit_entry_expired_still_reexpresses(b):
    # the requester's RTO outlived its Interest: the new Interest makes a new PIT entry, but
    # it comes from the face that asked, so the missing member is asked again
    ps, f = setup(b)
    wire, _ = encode_interest(agg_name(3, 1), encode_plan(Group("agg", ("w1", "w2"))), "agg",
                              100, KEY, KN)
    assert len(b.rx(ps, wire)) == 2                 # lives 100 ms
    b.rx(f["w1"], contribution("w1", [1.0]))
    b.later(0.2)
    b.fw.tick()                                     # its PIT entry swept
    assert len(b.fw.pit) == 1                       # (w2's collect: the aggregator's own)
    out, full = ask(b, ps, Group("agg", ("w1", "w2")))
    assert [(x, p.name) for x, p in out] == [(f["w2"], "/w2/ps/t/v=3/seg=1")]
    (face, sent), = b.rx(f["w2"], contribution("w2", [2.0]))
    assert (face, sent.name) == (ps, full)


def test_a_sum_made_after_its_requester_left_is_cached_for_the_retransmission(b):
    ps, f = setup(b)
    wire, _ = encode_interest(agg_name(3, 1), encode_plan(Group("agg", ("w1", "w2"))), "agg",
                              100, KEY, KN)
    b.rx(ps, wire)
    b.rx(f["w1"], contribution("w1", [1.0]))
    b.later(0.15)
    b.fw.tick()                                     # the requester's entry is gone
    assert b.rx(f["w2"], contribution("w2", [2.0])) == []
    assert b.fw.aggregation.counters.answered == 1
    out, full = ask(b, ps, Group("agg", ("w1", "w2")))
    assert [(x, p.kind, p.name) for x, p in out] == [(ps, "D", full)]   # from the CS
    assert b.fw.aggregation.counters.member_interests == 2


def test_an_exact_plan_is_answered_exact_and_the_root_float32_from_the_same_total():
    # a sub-aggregator asked for an exact sum answers int64; its parent adds it and answers
    # the PS float32: the bytes of the one-level sum, where a float32 partial sum was not
    vals = {"w1": 64.0, "w2": 0.142, "w3": -62.0}
    one = summable.FixedPointSum(1)
    for v in vals.values():
        one.add(summable.encode(np.array([v])))
    sub = Bench()
    sub.fw.configure_aggregator(AggregatorConfig(TRAINING, "agg2", KEY, KN))
    ps, f = setup(sub, ("w1", "w2"))
    _, full = ask(sub, ps, Group("agg2", ("w1", "w2"), exact=True))
    sub.rx(f["w1"], contribution("w1", [vals["w1"]]))
    (_, sent), = sub.rx(f["w2"], contribution("w2", [vals["w2"]]))
    partial = verified_content(sent.net, KEY)
    assert sent.name == full and summable.is_exact(partial)
    edge = Bench()
    edge.fw.configure_aggregator(AggregatorConfig(TRAINING, "edge", KEY, KN))
    ps, f = setup(edge, ("w3",))
    down = edge.face()
    edge.route("/agg2", down)
    out, full = ask(edge, ps, Group("edge", (Group("agg2", ("w1", "w2")), "w3")))
    asked = next(p for x, p in out if x == down)
    answer = bytes(make_data(Name.from_str(asked.name), MetaInfo(), partial,
                             signer=HmacSigner(KEY, KEY_NAME)))
    assert edge.rx(down, answer) == []
    (_, sent), = edge.rx(f["w3"], contribution("w3", [vals["w3"]]))
    root = verified_content(sent.net, KEY)
    assert not summable.is_exact(root) and root == one.result()


def test_an_exact_sum_too_large_for_a_packet_is_nacked(b):
    # a segment of 1997 values (a one-level training's) summed exact: 16 KB, no packet holds
    # it; the requester is Nacked and collects those workers itself
    ps, f = setup(b)
    ask(b, ps, Group("agg", ("w1", "w2"), exact=True))
    b.rx(f["w1"], contribution("w1", np.ones(1997)))
    out = [(x, p) for x, p in b.rx(f["w2"], contribution("w2", np.ones(1997)))]
    assert [(x, p.kind, p.reason) for x, p in out] == [(ps, "N", NACK_CONGESTION)]
    c = b.fw.aggregation.counters
    assert (c.oversize, c.abandoned, c.answered) == (1, 1, 0)
    assert len(b.fw.aggregation.pool) == 0


# ---- plans must be signed under the training's key ---------------------------------------------

PLAN = Group("agg", ("w1", "w2"))
HINT = [Name.from_str("/agg")]


def genuine(version: int = 3, seg: int = 1, plan: Group = PLAN) -> bytes:
    return encode_interest(agg_name(version, seg), encode_plan(plan), plan.at, 4000, KEY, KN)[0]


def with_digest(name: bytes, tail: bytes, digest: bytes | None = None) -> bytes:
    """An `*aggregate*` Interest carrying `tail` (its elements after the name) whose name ends
    in `digest` (None: the right one, SHA-256 of the tail)."""
    digest = hashlib.sha256(tail).digest() if digest is None else digest
    hint = encode_tlv(0x1E, encode_tlv(7, encode_tlv(8, b"agg")))
    body = encode_tlv(7, name + encode_tlv(2, digest)) + b"\x12\x00" + hint + \
        b"\x0a\x04abcd\x0c\x02\x0f\xa0" + tail
    return encode_tlv(5, body)


def tampered_plan() -> bytes:
    wire = bytearray(genuine())
    at = wire.index(b"w2")
    wire[at:at + 2] = b"w3"                     # the plan says w3: digest and signature wrong
    return bytes(wire)


def signed_elements() -> bytes:
    """The genuine Interest's ApplicationParameters, InterestSignatureInfo and Value."""
    return signed_parameters(agg_name(3, 1), encode_plan(PLAN), KEY, KN)[1]


def redigested_plan() -> bytes:
    """The plan tampered with and the name's digest made right: the signature is still wrong."""
    return with_digest(agg_name(3, 1), signed_elements().replace(b"w2", b"w3"))


FORGED = {
    # python-ndn adds the right digest of the plan; nothing signs it
    "unsigned": lambda: bytes(make_interest(
        Name.from_bytes(encode_tlv(7, agg_name(3, 1))),
        InterestParam(must_be_fresh=True, forwarding_hint=HINT), app_param=encode_plan(PLAN))),
    "zero digest": lambda: with_digest(agg_name(3, 1), encode_tlv(0x24, encode_plan(PLAN)),
                                       bytes(32)),
    "another key": lambda: encode_interest(agg_name(3, 1), encode_plan(PLAN), "agg", 4000,
                                           b"z" * 32, KN)[0],
    "another key name": lambda: encode_interest(agg_name(3, 1), encode_plan(PLAN), "agg", 4000,
                                                KEY, nv("/ps/other/KEY"))[0],
    "DigestSha256": lambda: bytes(make_interest(
        Name.from_bytes(encode_tlv(7, agg_name(3, 1))),
        InterestParam(must_be_fresh=True, forwarding_hint=HINT), app_param=encode_plan(PLAN),
        signer=DigestSha256Signer(for_interest=True))),
    "plan tampered": tampered_plan,
    "plan tampered, digest redone": redigested_plan,
    "an element after the signature": lambda: with_digest(   # (non-critical: decoded)
        agg_name(3, 1), signed_elements() + b"\x30\x00"),
}


@pytest.mark.parametrize("how", sorted(FORGED))
def test_a_plan_not_signed_under_the_training_key_claims_nothing_and_is_counted(b, how):
    ps, f = setup(b)
    out = [(x, parse_out(w)) for x, w in b.fw.on_receive(ps, FORGED[how]())]
    agg = b.fw.aggregation
    assert out == []                                # dropped: no member Interest, no Nack
    assert len(agg.pool) == 0 and agg.pool.counters.claimed == 0
    c = agg.counters
    assert (c.unauthorised, c.interests, c.collisions, c.member_interests) == (1, 0, 0, 0)
    assert agg.status()["counters"]["unauthorised"] == 1
    # the genuine plan, after it, is summed as ever (past the strategy's retransmission
    # suppression: a forgery that copied the genuine name holds its PIT entry)
    b.later(0.05)
    out, _ = ask(b, ps, PLAN)
    assert sorted(p.name for _, p in out) == ["/w1/ps/t/v=3/seg=1", "/w2/ps/t/v=3/seg=1"]


def test_a_forgery_of_a_genuine_name_leaves_the_genuine_sum_alone(b):
    # the forged Interest shares the genuine one's name (copied) and PIT entry: dropped, not
    # Nacked, the genuine requester still gets its sum
    ps, f = setup(b)
    attacker = b.face()
    out, full = ask(b, ps, PLAN)
    wire = bytearray(genuine())
    wire[-1] ^= 1                                   # the signature value
    b.later(0.05)           # within the strategy's suppression it would not reach the aggregator
    assert b.rx(attacker, bytes(wire)) == []
    assert b.fw.aggregation.counters.unauthorised == 1
    b.rx(f["w1"], contribution("w1", [1.0]))
    sent = b.rx(f["w2"], contribution("w2", [2.0]))
    assert (ps, "D", full) in [(x, p.kind, p.name) for x, p in sent]


def test_a_signed_interest_as_python_ndn_signs_it_is_accepted(b):
    # python-ndn's make_interest with the training's HmacSigner: the same bytes as ours; with a
    # SignatureNonce and SignatureTime (as other signers add) it verifies too
    ps, f = setup(b)
    ours = genuine()
    name = Name.from_bytes(encode_tlv(7, agg_name(3, 1)))
    param = InterestParam(must_be_fresh=True, forwarding_hint=HINT, nonce=0x61626364,
                          lifetime=4000)
    theirs = bytes(make_interest(name, param, app_param=encode_plan(PLAN),
                                 signer=HmacSigner(KEY, KEY_NAME)))
    assert theirs == bytes(ours[:ours.index(b"\x0a\x04") + 2]) + b"abcd" + \
        ours[ours.index(b"\x0a\x04") + 6:]

    class WithNonceAndTime(HmacSigner):
        def write_signature_info(self, signature_info) -> None:
            super().write_signature_info(signature_info)
            signature_info.signature_nonce = 0x01020304
            signature_info.signature_time = 1_700_000_000_000

    noncy = bytes(make_interest(name, param, app_param=encode_plan(PLAN),
                                signer=WithNonceAndTime(KEY, KEY_NAME)))
    out = b.fw.on_receive(ps, noncy)
    assert len(out) == 2 and b.fw.aggregation.counters.unauthorised == 0


def test_the_sub_group_interest_the_aggregator_sends_is_signed_as_the_ps_signs():
    b = Bench()
    b.fw.configure_aggregator(AggregatorConfig(TRAINING, "edge", KEY, KN))
    ps, f = setup(b, ("w1",))
    down = b.face()
    b.route("/agg2", down)
    out, _ = ask(b, ps, Group("edge", ("w1", Group("agg2", ("w2", "w3")))))
    sub = next(p for x, p in out if x == down)
    plan = signed_plan(sub.net, nv(sub.name), KEY, KN)
    assert plan is not None and decode_plan(plan) == Group("agg2", ("w2", "w3"), True)
    assert signed_plan(sub.net, nv(sub.name), b"z" * 32, KN) is None
    # a sub-aggregator configured with the training's key takes it
    leaf = Bench()
    leaf.fw.configure_aggregator(AggregatorConfig(TRAINING, "agg2", KEY, KN))
    up = leaf.face()
    setup(leaf, ("w2", "w3"))
    assert len(leaf.fw.on_receive(up, sub.net)) == 2
    assert leaf.fw.aggregation.counters.unauthorised == 0


def test_a_replayed_interest_of_a_version_a_push_freed_is_nacked_and_counted(b):
    # a genuine Interest captured at version 3, replayed after the push of version 4: its
    # slots are free, the PS has moved on; summing it again would only hold a slot
    ps, f = setup(b)
    old = genuine(version=3, seg=2)
    up = b.face()
    b.fw.ppit.insert(nv("/ps/t"), 2, ps, b.now)
    b.rx(up, data(Name.to_str(Name.from_str("/*distribute*/ps/t") +
                              [Component.from_version(4), Component.from_segment(0)])))
    attacker = b.face()
    out = [(x, parse_out(w)) for x, w in b.fw.on_receive(attacker, old)]
    assert [(x, p.kind, p.reason) for x, p in out] == [(attacker, "N", NACK_CONGESTION)]
    agg = b.fw.aggregation
    assert agg.counters.stale == 1 and len(agg.pool) == 0 and agg.counters.interests == 0
    # the current version's is summed
    out, _ = ask(b, ps, PLAN, version=4, seg=2)
    assert len(out) == 2


def test_member_interests_are_the_collects_encode_interest_writes(b):
    # built from per-plan templates (the member's name but version and segment, the fixed
    # elements after it): byte for byte the fixed-shape encoder's collect, MustBeFresh
    from ndnps.ndn.encoders import encode_interest as encode_collect
    from ndnps.ndn.tlv import component_offsets
    ps, f = setup(b)
    wire, _ = encode_interest(agg_name(3, 1), encode_plan(Group("agg", ("w1", "w2"))), "agg",
                              4000, KEY, KN)
    out = b.raw(ps, wire)
    assert sorted(face for face, _ in out) == sorted(f.values())
    for _, member in out:
        i = decode_interest(member, 0, len(member))
        ends = component_offsets(i.name)
        comps = [i.name[a:e] for a, e in zip([0, *ends[:-1]], ends)]
        assert member == encode_collect(comps, int.from_bytes(i.nonce, "big"), 1000,
                                        must_be_fresh=True)
    # every segment's Interest of a version carries the same plan: decoded once
    b.raw(ps, encode_interest(agg_name(3, 2), encode_plan(Group("agg", ("w1", "w2"))), "agg",
                              4000, KEY, KN)[0])
    (t,) = b.fw.aggregation.trainings.values()
    assert len(t.plans) == 1 and b.fw.aggregation.counters.member_interests == 4


def test_a_value_the_sum_cannot_hold_among_batched_rows_abandons_the_sum(b):
    # the workers' rows are added a batch at a time: a refused value is found then, and the
    # sum is dropped and Nacked as when it was found at once
    ps, f = setup(b, ("w1", "w2", "w3"))
    ask(b, ps, Group("agg", ("w1", "w2", "w3")))
    assert b.rx(f["w1"], contribution("w1", [np.nan, 1.0])) == []
    assert b.rx(f["w2"], contribution("w2", [1.0, 1.0])) == []
    (face, sent), = b.rx(f["w3"], contribution("w3", [1.0, 1.0]))
    assert (face, sent.kind, sent.reason) == (ps, "N", NACK_CONGESTION)
    c = b.fw.aggregation.counters
    assert (c.rejected, c.abandoned, c.answered) == (1, 1, 0)
    assert len(b.fw.aggregation.pool) == 0


def test_the_aggregator_is_a_producer_reached_through_the_fib():
    # aggregators/add routes the training's aggregate Interests to the aggregator's internal
    # face and makes this node a producer region (a hint naming it is stripped); remove undoes
    # both, and an Interest hinted here then finds no route, as at any other node
    b = Bench()
    b.fw.network_region = [nv("/isp/site")]
    b.fw.configure_aggregator(AggregatorConfig(TRAINING, "agg", KEY, KN))
    entry = b.fw.fib.find_exact(nv("/*aggregate*/ps/t"))
    assert entry is not None
    (face,) = entry.nexthops
    assert b.fw.faces.get(face).remote_uri == "internal://aggregator"
    assert b.fw.network_region == [nv("/isp/site"), nv("/agg")]
    ps, f = setup(b)
    out, _ = ask(b, ps, PLAN)
    assert sorted(x for x, _ in out) == sorted(f.values())
    assert b.fw.remove_aggregator(TRAINING) and not b.fw.remove_aggregator(TRAINING)
    assert b.fw.fib.find_exact(nv("/*aggregate*/ps/t")) is None
    assert b.fw.network_region == [nv("/isp/site")]
    out, _ = ask(b, ps, PLAN, seg=2)
    assert [(x, p.kind, p.reason) for x, p in out] == [(ps, "N", NACK_NO_ROUTE)]
    b.fw.remove_face(face)                          # internal faces stay
    assert b.fw.faces.get(face) is not None
