"""In-network aggregation's wire pieces (ndnps/ndn/aggregation.py): the plan an `*aggregate*`
Interest carries, the aggregator configuration, the Interest itself (checked with python-ndn),
and the HMAC check of contributions and signature of sums."""
from __future__ import annotations

import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ndn.encoding import Component, InterestParam, MetaInfo, Name, make_data, make_interest
from ndn.encoding import parse_data, parse_interest
from ndn.security import DigestSha256Signer

from ndnps.client.security import Security
from ndnps.client.wire import parse_data as parse_ours
from tests.support.pyndn import HmacSigner
from ndnps.ndn.aggregation import (AT, EXACT, FIRST, GROUP, HMAC_WITH_SHA256, KEY, KEY_NAME,
                                   MAX_DEPTH, MAX_MEMBERS, MAX_NAME, MAX_SLOTS, NODE, SLOTS,
                                   TIMEOUT_MS, WORKER,
                                   AggregatorConfig, Group, application_parameters,
                                   decode_plan, encode_interest, encode_plan, full_name,
                                   signed_data, signed_plan, verified_content)
from ndnps.ndn.packet import decode_interest
from ndnps.ndn.tlv import (NAME, PARAMS_DIGEST, DecodeError, encode_tlv, name_from_str,
                           nonneg_element)
from ndnps.protocol import names

TRAINING = name_from_str("/ps/t1")
KEY_BYTES = b"training-key"
KEY_FORMAL = names.key("ps", "t1")
KEY_VALUE = b"".join(bytes(c) for c in KEY_FORMAL)        # the key name's TLV-VALUE
DATA_NAME = name_from_str("/w1/ps/t1/3/0")


def nested(depth: int) -> Group:
    """A chain of `depth` groups, each with one worker and the next group."""
    group = Group(f"n{depth}", (f"w{depth}",))
    for d in range(depth - 1, 0, -1):
        group = Group(f"n{d}", (f"w{d}", group))
    return group


# ---- the plan -----------------------------------------------------------------------------------

def test_a_flat_plan_round_trips_and_has_the_documented_layout():
    plan = Group("root", ("w1", "w2", "w3"))
    wire = encode_plan(plan)
    assert wire == encode_tlv(GROUP, encode_tlv(AT, b"root") + encode_tlv(WORKER, b"w1")
                              + encode_tlv(WORKER, b"w2") + encode_tlv(WORKER, b"w3"))
    assert decode_plan(wire) == plan
    assert decode_plan(memoryview(wire)) == plan


def test_a_nested_plan_round_trips_and_lists_workers_depth_first_in_plan_order():
    plan = Group("root", ("w1", Group("leaf1", ("w3", Group("rack", ("w5", "w7")), "w9")),
                          "w2", Group("leaf2", ("w4",))))
    assert plan.workers() == ("w1", "w3", "w5", "w7", "w9", "w2", "w4")
    assert decode_plan(encode_plan(plan)) == plan
    # non-ASCII names are UTF-8, counted in octets
    utf = Group("nœud", ("ouvrier-é", "w" * MAX_NAME))
    assert decode_plan(encode_plan(utf)) == utf


def test_the_exact_flag_round_trips_after_the_node():
    plan = Group("leaf1", ("w1", Group("rack", ("w2", "w3"), exact=True)), exact=True)
    wire = encode_plan(plan)
    assert wire.startswith(encode_tlv(GROUP, b"")[:1]) and \
        wire[2:].startswith(encode_tlv(AT, b"leaf1") + bytes((EXACT, 0)))
    assert decode_plan(wire) == plan and decode_plan(wire).exact
    # without it: the plan's bytes are what they were, and its digest (the name) differs
    assert encode_plan(Group("root", ("w1",))) == group(at(b"root"), worker(b"w1"))
    assert not decode_plan(GOOD).exact


def test_the_deepest_plan_allowed_round_trips():
    plan = nested(MAX_DEPTH)
    assert len(plan.workers()) == MAX_DEPTH
    assert decode_plan(encode_plan(plan)) == plan


def test_the_largest_plan_allowed_round_trips():
    plan = Group("root", tuple(f"w{i}" for i in range(MAX_MEMBERS // 2))
                 + (Group("leaf", tuple(f"v{i}" for i in range(MAX_MEMBERS // 2))),))
    assert len(plan.workers()) == MAX_MEMBERS
    assert decode_plan(encode_plan(plan)) == plan


@pytest.mark.parametrize("plan, message", [
    (Group("root", ()), "distinct workers"),
    (Group("root", ("w1", Group("leaf", ()))), "no members"),
    (Group("root", ("w1", "w1")), "distinct workers"),
    (Group("root", ("w1", Group("leaf", ("w2", "w1")))), "distinct workers"),
    (Group("root", tuple(f"w{i}" for i in range(MAX_MEMBERS + 1))), "distinct workers"),
    (nested(MAX_DEPTH + 1), "nest"),
    (Group("root", ("w" * (MAX_NAME + 1),)), "octets"),
    (Group("root", ("é" * (MAX_NAME // 2 + 1),)), "octets"),    # 66 octets, 33 characters
    (Group("r" * (MAX_NAME + 1), ("w1",)), "octets"),
    (Group("", ("w1",)), "octets"),
    (Group("root", ("",)), "octets"),
])
def test_bad_plans_are_refused_on_encode(plan, message):
    with pytest.raises(ValueError, match=message):
        encode_plan(plan)


def group(*elements: bytes) -> bytes:
    return encode_tlv(GROUP, b"".join(elements))


def at(name: bytes) -> bytes:
    return encode_tlv(AT, name)


def worker(name: bytes) -> bytes:
    return encode_tlv(WORKER, name)


GOOD = encode_plan(Group("root", ("w1", Group("leaf", ("w2",)))))


@pytest.mark.parametrize("wire", [
    b"",
    GOOD[:1],
    GOOD[:-1],                                   # truncated: the length exceeds the buffer
    GOOD[:len(GOOD) // 2],
    GOOD + b"\x00",                              # trailing garbage
    GOOD + worker(b"w3"),                        # an element after the plan
    encode_tlv(0x81, GOOD[2:]),                  # wrong outer type
    encode_tlv(NAME, GOOD[2:]),
    group(worker(b"w1"), at(b"root")),           # WORKER before AT
    group(group(at(b"leaf"), worker(b"w2")), at(b"root")),   # GROUP before AT
    group(at(b"root"), at(b"again"), worker(b"w1")),         # two ATs
    group(at(b"root")),                          # no members
    group(worker(b"w1")),                        # no AT
    group(),
    group(at(b"root"), worker(b"w1"), group(at(b"leaf"))),   # a sub-group without members
    group(at(b"root"), encode_tlv(0x83, b"x"), worker(b"w1")),   # unknown element
    group(at(b"root"), worker(b"\xff\xfe")),     # invalid UTF-8
    group(at(b"\xc3"), worker(b"w1")),           # truncated UTF-8 sequence
    group(at(b""), worker(b"w1")),               # empty name
    group(at(b"root"), worker(b"")),
    group(at(b"root"), worker(b"w" * (MAX_NAME + 1))),
    group(at(b"root"), worker(b"w1"), worker(b"w1")),        # duplicate worker
    group(at(b"root"), worker(b"w1"), group(at(b"leaf"), worker(b"w1"))),
    group(at(b"root"), *(worker(f"w{i}".encode()) for i in range(MAX_MEMBERS + 1))),
    encode_plan(nested(MAX_DEPTH))[:-1],
    group(bytes((EXACT, 0)), at(b"root"), worker(b"w1")),   # Exact before AT
    group(at(b"root"), worker(b"w1"), bytes((EXACT, 0))),   # Exact after a member
    group(at(b"root"), bytes((EXACT, 0)) * 2, worker(b"w1")),   # twice
    group(at(b"root"), encode_tlv(EXACT, b"\x01"), worker(b"w1")),   # not empty
])
def test_malformed_plans_are_refused_on_decode(wire):
    with pytest.raises(DecodeError):
        decode_plan(wire)


def test_a_plan_nested_too_deep_is_refused_on_decode():
    inner = group(at(b"n5"), worker(b"w5"))
    for d in range(MAX_DEPTH, 0, -1):
        inner = group(at(f"n{d}".encode()), worker(f"w{d}".encode()), inner)
    with pytest.raises(DecodeError, match="deep"):
        decode_plan(inner)
    # one level less decodes
    assert len(decode_plan(encode_plan(nested(MAX_DEPTH))).workers()) == MAX_DEPTH


names_st = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8)


@st.composite
def plans(draw, depth: int = 1) -> Group:
    members: list = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < MAX_DEPTH and draw(st.booleans()):
            members.append(draw(plans(depth + 1)))
        else:
            members.append(draw(names_st))
    return Group(draw(names_st), tuple(members), draw(st.booleans()))


@settings(max_examples=150, deadline=None)
@given(plans())
def test_every_valid_plan_round_trips(plan):
    workers = plan.workers()
    if len(set(workers)) != len(workers):
        with pytest.raises(ValueError):
            encode_plan(plan)
        return
    assert decode_plan(encode_plan(plan)) == plan


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=64),
                 st.binary(max_size=40).map(lambda b: bytes((GROUP,)) + b),
                 st.tuples(st.sampled_from([GOOD, encode_plan(nested(MAX_DEPTH))]),
                           st.integers(0, 200), st.integers(0, 255)).map(
                     lambda t: t[0][:t[1] % len(t[0])] + bytes((t[2],))
                     + t[0][t[1] % len(t[0]) + 1:])))
def test_decoding_any_bytes_gives_a_plan_or_a_decode_error(wire):
    try:
        plan = decode_plan(wire)
    except DecodeError:
        return
    assert isinstance(plan, Group)
    assert decode_plan(encode_plan(plan)) == plan     # what decodes, encodes


# ---- the configuration --------------------------------------------------------------------------

CONFIG = AggregatorConfig(TRAINING, "leaf1", KEY_BYTES, KEY_VALUE, slots=512, timeout=1.5)


def test_the_configuration_round_trips():
    assert AggregatorConfig.decode(CONFIG.encode()) == CONFIG
    assert AggregatorConfig.decode(memoryview(CONFIG.encode())) == CONFIG
    default = AggregatorConfig(TRAINING, "root", KEY_BYTES, KEY_VALUE)
    assert AggregatorConfig.decode(default.encode()) == default
    assert (default.slots, default.timeout) == (1024, 2.0)


def test_slots_and_timeout_default_when_absent():
    wire = b"".join((encode_tlv(NAME, TRAINING), encode_tlv(NODE, b"root"),
                     encode_tlv(KEY, KEY_BYTES), encode_tlv(KEY_NAME, KEY_VALUE)))
    got = AggregatorConfig.decode(wire)
    assert (got.training, got.node, got.key, got.key_name) == (TRAINING, "root", KEY_BYTES,
                                                               KEY_VALUE)
    assert (got.slots, got.timeout, got.first) == (1024, 2.0, 0)


def test_a_range_of_the_pool_round_trips_and_first_0_is_not_encoded():
    ranged = AggregatorConfig(TRAINING, "leaf1", KEY_BYTES, KEY_VALUE, slots=512, timeout=1.5,
                              first=4096)
    wire = ranged.encode()
    assert wire == CONFIG.encode() + nonneg_element(FIRST, 4096)
    assert AggregatorConfig.decode(wire) == ranged
    assert AggregatorConfig.decode(CONFIG.encode()).first == 0     # an older encoding: 0
    last = AggregatorConfig(TRAINING, "n", KEY_BYTES, KEY_VALUE, slots=1, first=MAX_SLOTS - 1)
    assert AggregatorConfig.decode(last.encode()) == last


@pytest.mark.parametrize("first, slots, message", [
    (-1, 8, "first must be >= 0"),
    (MAX_SLOTS - 7, 8, "passes the pool's"),
    (0, 0, "slots must be"),
])
def test_a_range_out_of_the_pool_is_refused_with_its_reason(first, slots, message):
    with pytest.raises(ValueError, match=message):
        AggregatorConfig(TRAINING, "n", KEY_BYTES, KEY_VALUE, slots=slots, first=first)


def test_a_decoded_range_past_the_pool_is_a_decode_error():
    with pytest.raises(DecodeError, match="passes the pool's"):
        AggregatorConfig.decode(config_wire() + nonneg_element(FIRST, MAX_SLOTS - 511))


def config_wire(**replace: bytes | None) -> bytes:
    """CONFIG's elements, some replaced (None: left out)."""
    parts: dict[str, bytes | None] = {
        "name": encode_tlv(NAME, TRAINING), "node": encode_tlv(NODE, b"leaf1"),
        "key": encode_tlv(KEY, KEY_BYTES), "key_name": encode_tlv(KEY_NAME, KEY_VALUE),
        "slots": nonneg_element(SLOTS, 512), "timeout": nonneg_element(TIMEOUT_MS, 1500)}
    parts.update(replace)
    return b"".join(v for v in parts.values() if v is not None)


def test_the_helper_builds_the_encoded_configuration():
    assert config_wire() == CONFIG.encode()


@pytest.mark.parametrize("replace", [
    {"name": None},
    {"node": None},
    {"key": None},
    {"key_name": None},
    {"name": encode_tlv(NAME, b"")},
    {"key": encode_tlv(KEY, b"")},
    {"node": encode_tlv(NODE, b"")},
    {"node": encode_tlv(NODE, b"\xff")},
    {"node": encode_tlv(NODE, b"n" * (MAX_NAME + 1))},
    {"slots": nonneg_element(SLOTS, 0)},
    {"slots": nonneg_element(SLOTS, (1 << 20) + 1)},
    {"slots": encode_tlv(SLOTS, b"\x00\x00\x01")},          # a NonNegativeInteger of 3 octets
    {"timeout": nonneg_element(TIMEOUT_MS, 0)},
    {"timeout": nonneg_element(TIMEOUT_MS, 60_001)},
    {"name": encode_tlv(NAME, b"\x08\x05ab")},              # a component past the name's end
    {"name": encode_tlv(NAME, b"\x08")},
    {"key_name": encode_tlv(KEY_NAME, b"\x08\x09key")},
    {"timeout": nonneg_element(TIMEOUT_MS, 1500)[:-1]},     # truncated
])
def test_bad_configurations_are_refused(replace):
    with pytest.raises(DecodeError):
        AggregatorConfig.decode(config_wire(**replace))


def test_the_bounds_themselves_are_accepted():
    got = AggregatorConfig.decode(config_wire(slots=nonneg_element(SLOTS, 1 << 20),
                                              timeout=nonneg_element(TIMEOUT_MS, 60_000)))
    assert (got.slots, got.timeout) == (1 << 20, 60.0)
    assert AggregatorConfig.decode(config_wire(slots=nonneg_element(SLOTS, 1))).slots == 1


def test_encoding_refuses_an_empty_key_or_a_bad_node():
    with pytest.raises(ValueError, match="key"):
        AggregatorConfig(TRAINING, "root", b"", KEY_VALUE).encode()
    with pytest.raises(ValueError):
        AggregatorConfig(TRAINING, "", KEY_BYTES, KEY_VALUE).encode()


# ---- the Interest -------------------------------------------------------------------------------

PLAN = encode_plan(Group("root", ("w1", Group("leaf1", ("w2", "w3")))))
AGG_NAME = name_from_str("/*aggregate*/ps/t1/3/0")


def test_the_interest_parses_with_python_ndn_and_carries_its_digest():
    wire, full = encode_interest(AGG_NAME, PLAN, "leaf1", 1234, KEY_BYTES, KEY_VALUE,
                                 b"\x01\x02\x03\x04")
    name, param, app_param, sig = parse_interest(wire, with_tl=True)
    assert bytes(app_param) == PLAN
    last = name[-1]
    assert Component.get_type(last) == Component.TYPE_PARAMETERS_SHA256
    # the digest covers the parameters and the signature (packet format v0.3)
    signed = wire[wire.index(encode_tlv(0x24, PLAN)):]
    assert bytes(Component.get_value(last)) == hashlib.sha256(signed).digest()
    # python-ndn's own notion of what the digest and the signature cover agrees
    assert bytes(sig.digest_value_buf) == hashlib.sha256(
        b"".join(bytes(p) for p in sig.digest_covered_part)).digest()
    assert sig.signature_info.signature_type == HMAC_WITH_SHA256
    assert Name.to_bytes(sig.signature_info.key_locator.name) == encode_tlv(NAME, KEY_VALUE)
    assert sig.signature_info.signature_nonce is None and sig.signature_info.signature_time is None
    covered = b"".join(bytes(p) for p in sig.signature_covered_part)
    assert bytes(sig.signature_value_buf) == hmac.new(KEY_BYTES, covered, "sha256").digest()
    assert b"".join(bytes(c) for c in name[:-1]) == AGG_NAME
    assert Name.to_bytes(name) == encode_tlv(NAME, full)
    assert full.startswith(AGG_NAME)
    assert param.must_be_fresh and not param.can_be_prefix
    assert param.lifetime == 1234
    assert param.nonce == 0x01020304
    assert param.hop_limit is None
    assert len(param.forwarding_hint) == 1
    (hint,) = param.forwarding_hint
    assert len(hint) == 1
    assert Component.get_type(hint[0]) == Component.TYPE_GENERIC
    assert bytes(Component.get_value(hint[0])) == b"leaf1"


def test_the_interest_is_what_python_ndn_makes_with_the_trainings_signer():
    ours, full = encode_interest(AGG_NAME, PLAN, "leaf1", 1234, KEY_BYTES, KEY_VALUE,
                                 b"\x01\x02\x03\x04")
    theirs, their_name = make_interest(
        Name.from_bytes(encode_tlv(NAME, AGG_NAME)),
        InterestParam(must_be_fresh=True, nonce=0x01020304, lifetime=1234,
                      forwarding_hint=[Name.from_str("/leaf1")]),
        app_param=PLAN, signer=HmacSigner(KEY_BYTES, KEY_FORMAL), need_final_name=True)
    assert ours == bytes(theirs) and encode_tlv(NAME, full) == Name.to_bytes(their_name)


def test_the_full_name_depends_on_the_plan_and_key_and_a_nonce_is_drawn_when_not_given():
    wire1, full1 = encode_interest(AGG_NAME, PLAN, "root", 4000, KEY_BYTES, KEY_VALUE)
    wire2, full2 = encode_interest(AGG_NAME, PLAN, "root", 4000,
                                   hmac.new(KEY_BYTES, digestmod=hashlib.sha256), KEY_VALUE)
    _, other = encode_interest(AGG_NAME, encode_plan(Group("root", ("w1",))), "root", 4000,
                               KEY_BYTES, KEY_VALUE)
    _, other_key = encode_interest(AGG_NAME, PLAN, "root", 4000, b"another key", KEY_VALUE)
    # signed without SignatureNonce or SignatureTime: the same request, the same name
    assert full1 == full2 == full_name(AGG_NAME, PLAN, KEY_BYTES, KEY_VALUE)
    assert len({full1, other, other_key}) == 3
    assert parse_interest(wire1)[1].nonce != parse_interest(wire2)[1].nonce   # 2^-32 chance
    assert wire1[wire1.index(encode_tlv(0x24, PLAN)):] == wire2[wire2.index(encode_tlv(0x24,
                                                                                        PLAN)):]


def test_a_bad_hint_is_refused():
    with pytest.raises(ValueError):
        encode_interest(AGG_NAME, PLAN, "", 4000, KEY_BYTES, KEY_VALUE)
    with pytest.raises(ValueError):
        encode_interest(AGG_NAME, PLAN, "h" * (MAX_NAME + 1), 4000, KEY_BYTES, KEY_VALUE)


def check(wire: bytes, key: bytes = KEY_BYTES, key_name: bytes = KEY_VALUE) -> bytes | None:
    i = decode_interest(wire, 0, len(wire))
    plan = signed_plan(i.wire, i.name, key, key_name)
    return None if plan is None else bytes(plan)


def signed_of(wire: bytes) -> bytes:
    """An aggregate Interest's signed elements: ApplicationParameters to the end."""
    return wire[wire.index(encode_tlv(0x24, PLAN)):]


GENUINE = encode_interest(AGG_NAME, PLAN, "root", 4000, KEY_BYTES, KEY_VALUE)[0]


def resigned(old: bytes, new: bytes, digest: bool = True) -> bytes:
    """GENUINE with `old` replaced by `new` in its signed elements, the name's digest made
    right again (or left as it was: digest False)."""
    head, tail = GENUINE[:-len(signed_of(GENUINE))], signed_of(GENUINE).replace(old, new)
    name = decode_interest(GENUINE, 0, len(GENUINE)).name
    if digest:
        name = name[:-34] + encode_tlv(PARAMS_DIGEST, hashlib.sha256(tail).digest())
    return encode_tlv(0x05, encode_tlv(NAME, name) + head[head.index(b"\x12\x00"):] + tail)


def test_a_genuine_plan_verifies_under_the_key_or_its_hmac_object():
    assert check(GENUINE) == PLAN
    i = decode_interest(GENUINE, 0, len(GENUINE))
    keyed = hmac.new(KEY_BYTES, digestmod=hashlib.sha256)
    assert bytes(signed_plan(i.wire, i.name, keyed, KEY_VALUE)) == PLAN
    assert bytes(signed_plan(i.wire, i.name, keyed, KEY_VALUE)) == PLAN    # (copied, not used)


@pytest.mark.parametrize("wire, key, key_name", [
    (GENUINE, b"another key", KEY_VALUE),                        # another key
    (GENUINE, KEY_BYTES, name_from_str("/ps/t2/KEY")),           # another key name
    (resigned(b"w2", b"w4"), KEY_BYTES, KEY_VALUE),              # the plan changed
    (resigned(b"w2", b"w4", digest=False), KEY_BYTES, KEY_VALUE),  # and the digest is wrong
    (resigned(b"\x1b\x01\x04", b"\x1b\x01\x00"), KEY_BYTES, KEY_VALUE),  # SignatureType 0
    (resigned(signed_of(GENUINE), signed_of(GENUINE) + b"\x30\x00"), KEY_BYTES,
     KEY_VALUE),                                                 # an element after it
    (resigned(signed_of(GENUINE), encode_tlv(0x24, PLAN)), KEY_BYTES, KEY_VALUE),  # no sig
    (bytes(make_interest(Name.from_bytes(encode_tlv(NAME, AGG_NAME)), InterestParam(),
                         app_param=PLAN)), KEY_BYTES, KEY_VALUE),  # unsigned
    (bytes(make_interest(Name.from_bytes(encode_tlv(NAME, AGG_NAME)), InterestParam(),
                         app_param=PLAN, signer=DigestSha256Signer(for_interest=True))),
     KEY_BYTES, KEY_VALUE),
    (bytes(make_interest("/ps/t1/3/0", InterestParam())), KEY_BYTES, KEY_VALUE),
])
def test_anything_else_does_not(wire, key, key_name):
    assert check(wire, key, key_name) is None


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(GENUINE) - 1), st.integers(1, 255))
def test_a_changed_byte_verifies_only_where_the_signature_does_not_reach(at, flip):
    wire = bytearray(GENUINE)
    wire[at] ^= flip
    try:
        i = decode_interest(bytes(wire), 0, len(wire))
    except DecodeError:
        return
    plan = signed_plan(i.wire, i.name, KEY_BYTES, KEY_VALUE)
    # what the signature does not cover may change (the Nonce, the lifetime, the hint)
    if plan is not None:
        assert i.name == decode_interest(GENUINE, 0, len(GENUINE)).name
        assert signed_of(bytes(wire)) == signed_of(GENUINE)


def test_application_parameters():
    wire, _ = encode_interest(AGG_NAME, PLAN, "root", 4000, KEY_BYTES, KEY_VALUE, b"abcd")
    assert bytes(application_parameters(wire)) == PLAN
    assert decode_plan(application_parameters(wire)) == decode_plan(PLAN)
    plain = bytes(make_interest("/ps/t1/3/0", InterestParam(lifetime=4000)))
    assert application_parameters(plain) is None
    with_params = bytes(make_interest("/ps/t1/3/0", InterestParam(), app_param=b"xyz"))
    assert bytes(application_parameters(with_params)) == b"xyz"


@pytest.mark.parametrize("wire", [
    bytes(make_data("/ps/t1/3/0", MetaInfo(), b"x", signer=DigestSha256Signer())),
    b"",
    b"\x05",
    GENUINE[:-3],                                               # truncated
])
def test_application_parameters_refuses_what_is_not_an_interest(wire):
    with pytest.raises(DecodeError):
        application_parameters(wire)


# ---- contributions and sums ---------------------------------------------------------------------

def hmac_data(content: bytes = b"gradient", key: bytes = KEY_BYTES) -> bytes:
    return bytes(make_data(Name.from_bytes(encode_tlv(NAME, DATA_NAME)),
                           MetaInfo(freshness_period=1000), content,
                           signer=HmacSigner(key, KEY_FORMAL)))


def test_a_contribution_under_the_key_verifies():
    assert bytes(verified_content(hmac_data(b"gradient"), KEY_BYTES)) == b"gradient"
    assert bytes(verified_content(hmac_data(b""), KEY_BYTES)) == b""


def test_a_contribution_under_another_key_or_another_signature_does_not():
    assert verified_content(hmac_data(), b"another key") is None
    assert verified_content(hmac_data(key=b"another key"), KEY_BYTES) is None
    digest = bytes(make_data(Name.from_bytes(encode_tlv(NAME, DATA_NAME)), MetaInfo(),
                             b"gradient", signer=DigestSha256Signer()))
    assert verified_content(digest, KEY_BYTES) is None


def test_a_tampered_contribution_does_not_verify():
    wire = hmac_data(b"gradient")
    pos = wire.index(b"gradient")
    for at_ in (pos, pos + 7, len(wire) - 1):          # the content, the signature value
        bad = bytearray(wire)
        bad[at_] ^= 0x01
        assert verified_content(bytes(bad), KEY_BYTES) is None


@pytest.mark.parametrize("wire", [
    b"", b"\x06", b"\x06\x05ab", b"\xff" * 20, hmac_data()[:-1], hmac_data()[:-33],
    hmac_data()[:10],
    bytes(make_interest("/ps/t1/3/0", InterestParam())),
])
def test_garbage_does_not_verify(wire):
    assert verified_content(wire, KEY_BYTES) is None


def test_a_signed_sum_parses_with_python_ndn_and_verifies():
    wire = signed_data(DATA_NAME, b"the sum", KEY_BYTES, KEY_VALUE, freshness_ms=250)
    name, meta, content, sig = parse_data(wire, with_tl=True)
    assert Name.to_bytes(name) == encode_tlv(NAME, DATA_NAME)
    assert bytes(content) == b"the sum"
    assert meta.freshness_period == 250
    assert sig.signature_info.signature_type == HMAC_WITH_SHA256 == 4
    assert Name.to_bytes(sig.signature_info.key_locator.name) == encode_tlv(NAME, KEY_VALUE)
    assert Security(KEY_BYTES, KEY_FORMAL).verify(parse_ours(wire))
    assert not Security(b"another key", KEY_FORMAL).verify(parse_ours(wire))
    assert bytes(verified_content(wire, KEY_BYTES)) == b"the sum"
    assert verified_content(wire, b"another key") is None


def test_a_signed_sum_is_what_python_ndn_makes_with_our_signer():
    ours = signed_data(DATA_NAME, b"the sum", KEY_BYTES, KEY_VALUE)
    theirs = bytes(make_data(Name.from_bytes(encode_tlv(NAME, DATA_NAME)),
                             MetaInfo(freshness_period=1000), b"the sum",
                             signer=HmacSigner(KEY_BYTES, KEY_FORMAL)))
    assert ours == theirs


def test_a_datacentres_plan_fits_one_interest_and_a_longer_one_is_refused():
    from ndnps.ndn.aggregation import MAX_PLAN
    # 1,024 workers in 128 edge groups of 8, as a k = 16 fat-tree's edge-only placement
    edges = tuple(Group(f"e{p}-{i}", tuple(f"w{(p - 1) * 64 + (i - 1) * 8 + j + 1}"
                                            for j in range(8)))
                  for p in range(1, 17) for i in range(1, 9))
    plan = encode_plan(Group("e1-1", edges))
    assert len(plan) <= MAX_PLAN and len(decode_plan(plan).workers()) == 1024
    long_names = Group("root", tuple(f"{i:064}" for i in range(200)))
    with pytest.raises(ValueError, match="more than the 8000 one Interest carries"):
        encode_plan(long_names)
