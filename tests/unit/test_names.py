"""ndnps.protocol.names: every exchange's name is built and parsed in one place, with typed components."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ndn.encoding import Component, Name

from ndnps.protocol import names
from ndnps.ndn.conventions import segment_component, segment_number
from ndnps.ndn.markers import MARKERS

ids = st.text(st.characters(blacklist_characters="/", blacklist_categories=("Cs",)),
              min_size=1, max_size=12).filter(
    lambda s: s not in (".", "..") and s.encode() not in MARKERS)
nums = st.integers(min_value=0, max_value=2**40)

ROUND_TRIPS = [
    (names.task, names.parse_task, ("w1", "ps", "t1")),
    (names.content, names.parse_content, ("ps", "t1", "w1", 3)),
    (names.insert, names.parse_insert, ("ps", "t1")),
    (names.confirm, names.parse_confirm, ("ps", "t1")),
    (names.remove, names.parse_remove, ("ps", "t1")),
    (names.collect, names.parse_collect, ("w1", "ps", "t1", 7, 2)),
    (names.distribute, names.parse_distribute, ("ps", "t1", 7, 2)),
    (names.params, names.parse_params, ("ps", "t1", "w1", 7, 2)),
]


@pytest.mark.parametrize("build,parse,args", ROUND_TRIPS)
def test_round_trip(build, parse, args):
    assert tuple(parse(build(*args))) == args


@pytest.mark.parametrize("build,parse,args", ROUND_TRIPS)
def test_every_parser_rejects_every_other_shape(build, parse, args):
    name = build(*args)
    for _, other_parse, _ in ROUND_TRIPS:
        if other_parse is not parse:
            assert other_parse(name) is None


def test_uri_forms_match_the_design():
    assert Name.to_str(names.insert("ps", "t1")) == "/%2Ainsert%2A/ps/t1"
    assert Name.to_str(names.distribute("ps", "t1", 5, 0)) == "/%2Adistribute%2A/ps/t1/v=5/seg=0"
    assert Name.to_str(names.collect("w1", "ps", "t1", 5, 1)) == "/w1/ps/t1/v=5/seg=1"
    assert Name.to_str(names.params("ps", "t1", "w2", 3, 0)) == "/ps/t1/w2/params/v=3/seg=0"
    # python-ndn's string form of the marker names is the same name
    assert Name.from_str("/*insert*/ps/t1") == names.insert("ps", "t1")


def test_versions_and_segments_are_typed_components():
    name = names.distribute("ps", "t1", 5, 9)
    assert Component.get_type(name[-2]) == Component.TYPE_VERSION
    assert Component.get_type(name[-1]) == Component.TYPE_SEGMENT
    # a generic component that merely looks like a number is not a version
    fake = name[:-2] + [Component.from_str("5"), Component.from_segment(9)]
    assert names.parse_distribute(fake) is None


def test_is_distribute_and_prefixes():
    assert names.is_distribute(names.distribute("ps", "t1", 1, 0))
    assert names.is_distribute(names.confirm("ps", "t1"))
    assert not names.is_distribute(names.insert("ps", "t1"))
    assert not names.is_distribute([])
    assert Name.is_prefix(names.insert_prefix("ps"), names.insert("ps", "t1"))
    assert Name.is_prefix(names.remove_prefix("ps"), names.remove("ps", "t1"))
    assert Name.is_prefix(names.distribute_prefix("ps"), names.distribute("ps", "t1", 1, 0))
    assert Name.is_prefix(names.node("w1"), names.collect("w1", "ps", "t1", 0, 0))


def test_final_block_id():
    assert segment_number(segment_component(41)) == 41
    assert segment_number(bytes(Component.from_version(41))) is None
    assert segment_number(None) is None
    assert segment_number(b"\x32") is None          # truncated


@pytest.mark.parametrize("bad", ["", "a/b", ".", "..", "*insert*", "*distribute*", "*remove*", 5])
def test_bad_identifiers_are_refused(bad):
    # not a str at all: the compiled build refuses it at the call (TypeError), the sources
    # when they look at it (BadName); a clear error either way
    with pytest.raises((names.BadName, TypeError)):
        names.task(bad, "ps", "t1")


@given(ids, ids, ids, nums, nums)
def test_round_trip_any_identifier(gpu, ps, train, version, seg):
    assert names.parse_collect(names.collect(gpu, ps, train, version, seg)) == \
        (gpu, ps, train, version, seg)
    assert names.parse_distribute(Name.from_bytes(Name.to_bytes(
        names.distribute(ps, train, version, seg)))) == (ps, train, version, seg)


def test_long_components_and_wide_types_parse_as_python_ndn_reads_them():
    long_id = "w" * 300                              # a 3-octet TLV-LENGTH
    assert names.parse_collect(names.collect(long_id, "ps", "t1", 2**40, 3)) == \
        (long_id, "ps", "t1", 2**40, 3)
    wide = Component.from_bytes(b"ps", typ=0x1234)   # a 3-octet TLV-TYPE: not generic
    name = names.collect("w1", "ps", "t1", 1, 0)
    assert names.parse_collect([name[0], wide, *name[2:]]) is None
    # memoryviews into a received packet read as bytes do
    assert names.parse_collect([memoryview(bytes(c)) for c in name]) == ("w1", "ps", "t1", 1, 0)


def test_partial_sums_of_an_all_reduce_round_trip_and_are_told_apart():
    from ndnps.exchanges.collectives.schedules import BCube
    n = names.partial("p3", "t1", 5, True, 1, 0, 2, 0)
    assert names.to_str(n) == "/p3/t1/v=5/reduce/1/0/2/seg=0"
    assert names.parse_partial(n) == names.Partial("p3", "t1", 5, True, 1, 0, 2, 0)
    g = names.partial("p3", "t1", 5, False, 0, 1, 10, 3)
    assert names.to_str(g) == "/p3/t1/v=5/gather/0/1/10/seg=3"
    assert names.parse_partial(g).reduce is False
    assert names.classify(b"".join(n), True) == "partial"
    assert names.parse_collect(n) is None and names.parse_partial(
        names.collect("w1", "ps", "t1", 3, 0)) is None
    # every transfer of a schedule gets its own name (per sender, within a version)
    seen = {}
    for t in BCube(3, 2).schedule(1000):
        name = b"".join(names.partial(f"p{t.src}", "t1", 1, t.reduce, t.set, t.level, t.part, 0))
        assert seen.setdefault(name, t.range) == t.range
    with pytest.raises(names.BadName):
        names.partial("p1", "t1", 1, True, -1, 0, 0, 0)


@pytest.mark.parametrize("text", ["/p1/t1/v=1/reduce/01/0/0/seg=0", "/p1/t1/v=1/reduce/x/0/0/seg=0",
                                  "/p1/t1/v=1/sum/0/0/0/seg=0", "/p1/t1/v=1/reduce/0/0/0"])
def test_malformed_partial_names_are_not_partials(text):
    from ndn.encoding import Name
    assert names.parse_partial(Name.from_str(text)) is None


def test_a_roll_call_answer_round_trips_and_is_no_other_name():
    n = names.roll("w3", "job", "t1", 2)
    assert names.parse_roll(n) == names.Roll("w3", "job", "t1", 2, 0)
    assert names.parse_collect(n) is None and names.parse_partial(n) is None
    assert names.classify(b"".join(n), True) == "roll"
    assert names.parse_roll(names.collect("w3", "job", "t1", 2, 0)) is None


def test_a_pipeline_stages_tensors_round_trip_and_are_no_other_name():
    a = names.stage_tensor("m1-fast", "t1", 7, False, 3, 0)
    assert names.to_str(a) == "/m1-fast/t1/v=7/act/3/seg=0"
    assert names.parse_stage_tensor(a) == names.StageTensor("m1-fast", "t1", 7, False, 3, 0)
    g = names.stage_tensor("m2-slow", "t1", 7, True, 0, 2)
    assert names.to_str(g) == "/m2-slow/t1/v=7/grad/0/seg=2"
    assert names.parse_stage_tensor(g).backward is True
    assert names.classify(b"".join(a), True) == "activation"
    assert names.classify(b"".join(g), False) == "backward"
    for other in (names.partial("m1-fast", "t1", 7, True, 0, 0, 3, 0),
                  names.collect("m1-fast", "ps", "t1", 7, 0), names.roll("m1", "ps", "t1", 1)):
        assert names.parse_stage_tensor(other) is None
    assert names.parse_partial(a) is None and names.parse_collect(a) is None
    with pytest.raises(names.BadName):
        names.stage_tensor("m1-fast", "t1", 1, False, -1, 0)


def test_a_pushed_data_is_told_by_its_first_component_bare_or_in_an_lp_packet():
    from ndnps.ndn.markers import is_pushed_data
    from ndnps.ndn.packet import lp_wrap
    from ndnps.ndn import tlv
    from tests.support.fwkit import data, interest
    pushed = data("/*distribute*/ps/t1/v1/seg0")
    assert is_pushed_data(pushed) and is_pushed_data(lp_wrap(pushed, pit_token=b"t"))
    assert is_pushed_data(memoryview(pushed))
    fields = tlv.encode_tlv(tlv.LP_SEQUENCE, bytes(8)) + tlv.encode_tlv(tlv.LP_PIT_TOKEN, b"t") \
        + tlv.nonneg_element(tlv.LP_CONGESTION_MARK, 1)           # headers before the Fragment
    framed = tlv.encode_tlv(tlv.LP_PACKET, fields + tlv.encode_tlv(tlv.LP_FRAGMENT, pushed))
    assert is_pushed_data(framed) and is_pushed_data(memoryview(framed))
    assert not is_pushed_data(interest("/*distribute*/ps/t1"))                # not a Data
    assert not is_pushed_data(tlv.encode_tlv(tlv.LP_PACKET, fields))          # no Fragment
    assert not is_pushed_data(data("/ps/t1/v1/seg0"))
    assert not is_pushed_data(data("/ps/*distribute*/v1"))          # a marker is first only
    assert not is_pushed_data(lp_wrap(data("/ps/x"), pit_token=b"t"))
    for bad in (b"", b"\x06", pushed[:5], b"\x05\x03\x07\x01\x08", b"\x64\x02\x51\x00"):
        assert not is_pushed_data(bad)
