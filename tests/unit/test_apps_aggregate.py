"""The PS's side of in-network aggregation without processes: the aggregatable gradient's segments
(protocol.messages), the plan the PS sends (ndnps/apps/common/aggregate.Aggregate.plan), and the
PS's own sums for segments that fall back, which must be the forwarders' bytes."""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from ndnps.apps.common.aggregate import Aggregate, _Adder
from ndnps.apps.common.training import PsCounters
from ndnps.client.security import Security
from ndnps.ndn import aggregation, summable
from ndnps.ndn.aggregation import Group
from ndnps.ndn.tlv import MAX_PACKET_SIZE
from ndnps.protocol import messages, names
from ndnps.protocol.codec import CodecError
from ndnps.protocol.config import PsConfig, from_table

E = messages.SUMMABLE_VALUES


def test_an_aggregatable_gradient_is_a_header_then_summable_values():
    vec = np.arange(2 * E + 5, dtype=np.float32)
    parts = messages.gradient_parts(vec, 7, 6, 0.25, 0.01, {"pushed": 3}, per=E)
    assert len(parts) == 1 + 3 == 1 + messages.value_segments(vec.size, E)
    assert all(len(p) <= 8000 for p in parts)
    meta = messages.parse_gradient_meta(parts[0], vec.size, 7, E)
    assert (meta.step, meta.base_version, meta.loss, meta.segments, meta.push) == \
        (7, 6, 0.25, 3, {"pushed": 3})
    values = np.concatenate([summable.decode(p)[0] for p in parts[1:]])
    assert np.array_equal(values, vec)
    assert all(summable.decode(p)[1] == 1 for p in parts[1:])


@pytest.mark.parametrize("n_params, step, why", [
    (2 * E + 5, 8, "not the gradient header of step 8"),
    (5 * E, 7, "value segments"),                       # another model's size
])
def test_a_header_for_another_step_or_model_is_refused(n_params, step, why):
    head = messages.gradient_parts(np.zeros(2 * E + 5, np.float32), 7, 7, 0.0, 0.0, per=E)[0]
    with pytest.raises(CodecError, match=why):
        messages.parse_gradient_meta(head, n_params, step, E)


def test_a_whole_gradient_blob_is_no_header():
    blob = messages.gradient_blob(np.zeros(10, np.float32), 3, 3, 0.0, 0.0)
    with pytest.raises(CodecError):
        messages.parse_gradient_meta(blob, 10, 3, E)


def aggregate(via: list[str], workers=("w1", "w2", "w3", "w4", "w5")) -> Aggregate:
    cfg = PsConfig.of(from_table({"workers": list(workers), "key": "k", "aggregate_at": "edge",
                                  "aggregate_via": via}))
    app = SimpleNamespace(lp_reliability=False, link_repair=False)
    return Aggregate(cfg, app, None, Security(b"k", names.key("ps", "t1")), 10, PsCounters(),
                     lambda w, why: None)


def test_the_plan_groups_the_aggregators_workers_under_the_edge():
    a = aggregate(["agg1:w1+w3", "agg2:w2+w4"])
    assert a.plan(["w1", "w2", "w3", "w4", "w5"]) == Group(
        "edge", (Group("agg1", ("w1", "w3")), Group("agg2", ("w2", "w4")), "w5"))
    # a dropped worker leaves its group; a group of one is summed at the edge
    assert a.plan(["w1", "w2", "w4", "w5"]) == Group(
        "edge", ("w1", Group("agg2", ("w2", "w4")), "w5"))
    assert aggregate([]).plan(["w2", "w5"]) == Group("edge", ("w2", "w5"))


def test_with_sub_groups_a_segment_holds_what_its_exact_partial_sum_can_carry():
    assert aggregate([]).per == E == 1997
    assert aggregate(["agg1:w1+w3"]).per == messages.SUMMABLE_VALUES_EXACT == 998
    vec = np.arange(3 * 998 + 1, dtype=np.float32) / 16
    parts = messages.gradient_parts(vec, 7, 6, 0.0, 0.0, per=998)
    assert len(parts) == 1 + 4 and summable.decode(parts[-1])[0].tolist() == [3 * 998 / 16]
    assert messages.parse_gradient_meta(parts[0], vec.size, 7, 998).segments == 4
    with pytest.raises(CodecError, match="value segments"):      # the other cut
        messages.parse_gradient_meta(parts[0], vec.size, 7, E)
    acc = summable.FixedPointSum(998)
    acc.add(parts[1])
    assert len(acc.result(exact=True)) <= 8000 == len(summable.encode(np.zeros(E)))


def test_the_largest_sums_fit_one_packet():
    # the worst case of either cut: the longest ids (64 octets, as a plan's names), the
    # largest step and segment numbers, the largest plan (its digest is the name's), a sum
    # of every value of a segment, signed as an aggregator signs it
    def largest(per: int, exact: bool) -> int:
        ps, train = "p" * 64, "t" * 64
        name = b"".join(bytes(c) for c in names.aggregate(ps, train, 2 ** 64 - 1, 2 ** 64 - 1))
        # (the plan is in the name as its digest: any plan that one Interest carries)
        plan = aggregation.encode_plan(Group("a" * 64, tuple(f"{i:064}" for i in range(100)),
                                             exact))
        acc = summable.FixedPointSum(per)
        acc.add(summable.encode(np.full(per, -255.9, np.float32)))
        key_name = b"".join(bytes(c) for c in names.key(ps, train))
        return len(aggregation.signed_data(aggregation.full_name(name, plan, b"k", key_name),
                                           acc.result(exact), b"k" * 32, key_name))
    exact, one_level = largest(messages.SUMMABLE_VALUES_EXACT, True), largest(E, False)
    assert exact <= one_level <= MAX_PACKET_SIZE - 400
    # what a one-level cut would make exact: no packet holds it (the aggregator Nacks it)
    assert largest(E, True) > MAX_PACKET_SIZE


def test_the_ps_sums_a_fallen_back_segment_as_the_network_would():
    rng = np.random.default_rng(3)
    grads = [rng.normal(0, 1, 50).astype(np.float32) for _ in range(4)]
    contents = [summable.encode(g) for g in grads]
    network = summable.FixedPointSum(50)             # what an aggregator answers
    for c in contents:
        network.add(c)
    # and a two-level plan: a sub-group's exact partial sum added at the edge
    sub = summable.FixedPointSum(50)
    for c in contents[1:3]:
        sub.add(c)
    edge = summable.FixedPointSum(50)
    for c in (contents[0], sub.result(exact=True), contents[3]):
        edge.add(c)
    assert edge.result() == network.result()
    for order in itertools.permutations(contents):
        adder = _Adder(50)
        assert all(adder.add(c) for c in order)
        values, count = adder.result()
        assert count == 4
        assert values.tobytes() == summable.decode(network.result())[0].tobytes()


def test_values_beyond_fixed_point_are_summed_in_floats_and_malformed_ones_refused():
    adder = _Adder(3)
    assert adder.add(summable.encode(np.array([1e6, 1.0, -2.0])))
    assert adder.add(summable.encode(np.array([1.0, 1.0, 1.0])))
    assert not adder.add(summable.encode(np.array([1.0, 1.0])))           # wrong size
    assert not adder.add(summable.encode(np.array([1.0, 1.0, 1.0]), 2))   # a sum, not one
    assert not adder.add(summable.encode(np.array([np.nan, 1.0, 1.0])))
    assert not adder.add(b"garbage")
    values, count = adder.result()
    assert count == 2 and values.tolist() == [1000001.0, 2.0, -1.0]
