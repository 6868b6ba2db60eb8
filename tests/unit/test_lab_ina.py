"""In-network aggregation in a scenario (ndnps/lab/ina.py): the `[ina]` table (every bad value
named), the edge and the candidates of each topology, where the placement puts the aggregators,
and the training's aggregate_at / aggregate_via that carry the result to the PS."""
from __future__ import annotations

import tomllib

import pytest

from ndnps.lab import ina
from ndnps.lab.spec import ScenarioError, load, parse
from ndnps.protocol.config import ConfigError, TrainingSpec, from_table

TREE = """
[topology]
kind = "tree"
workers = 4
leaves = 2

[training]
key = "k"
"""


def scenario(text: str, name: str = "t"):
    return parse(tomllib.loads(text), name)


def doc(text: str = TREE, **tables) -> dict:
    """The TOML document with tables replaced or added."""
    d = tomllib.loads(text)
    d.update(tables)
    return d


# ---- [ina] --------------------------------------------------------------------------------------

def test_ina_defaults():
    sc = scenario(TREE + "\n[ina]\n")
    assert sc.ina == ina.Ina()
    assert (sc.ina.k, sc.ina.capacity, sc.ina.slots, sc.ina.timeout, sc.ina.placement,
            sc.ina.link_mbps) == (2, 400.0, 1024, 2.0, "greedy", 1000.0)
    assert scenario(TREE).ina is None                 # no [ina]: no aggregation


def test_ina_values_are_taken():
    sc = scenario(TREE + """
[ina]
k = 1
capacity = 150
slots = 8
timeout = 0.5
placement = ["leaf2"]
link_mbps = 10
""")
    assert sc.ina == ina.Ina(1, 150.0, 8, 0.5, ["leaf2"], 10.0)
    assert isinstance(sc.ina.capacity, float) and isinstance(sc.ina.link_mbps, float)


@pytest.mark.parametrize("table, key", [
    ({"k": -1}, "ina.k"),
    ({"k": 65}, "ina.k"),
    ({"k": 1.5}, "ina.k"),
    ({"k": True}, "ina.k"),
    ({"k": "2"}, "ina.k"),
    ({"capacity": 0}, "ina.capacity"),
    ({"capacity": "fast"}, "ina.capacity"),
    ({"slots": 0}, "ina.slots"),
    ({"slots": (1 << 20) + 1}, "ina.slots"),
    ({"slots": 8.0}, "ina.slots"),
    ({"timeout": 0}, "ina.timeout"),
    ({"timeout": 61}, "ina.timeout"),
    ({"link_mbps": 0}, "ina.link_mbps"),
    ({"placement": "best"}, "ina.placement"),
    ({"placement": 2}, "ina.placement"),
    ({"placement": ["leaf3"]}, "ina.placement"),     # no such leaf
    ({"placement": ["root"]}, "ina.placement"),      # the edge: it always sums, not a choice
    ({"placement": ["leaf1", "w1"]}, "ina.placement"),
    ({"colour": "blue"}, "ina.colour"),
])
def test_bad_ina_values_name_the_key(table, key):
    with pytest.raises(ScenarioError) as e:
        parse(doc(ina=table), "bad")
    assert str(e.value).startswith(key + ":")


def test_ina_must_be_a_table():
    with pytest.raises(ScenarioError, match="^ina: expected a table"):
        parse(doc(ina=3), "bad")


def test_a_placement_list_names_the_candidates_when_refused():
    with pytest.raises(ScenarioError, match="'leaf3' is not a forwarder.*leaf1, leaf2"):
        parse(doc(ina={"placement": ["leaf3"]}), "bad")
    # a local star has no forwarder besides the edge
    with pytest.raises(ScenarioError, match="candidates: none"):
        parse(doc(topology={"kind": "star", "workers": 2}, ina={"placement": ["fwd"]}), "bad")


@pytest.mark.parametrize("text, message", [
    (TREE.replace('key = "k"', "") + "\n[ina]\n", "ina: needs training.key"),
    (TREE + 'mode = "async"\n[ina]\n', "ina: needs training.mode"),
    (TREE + 'aggregate_at = "root"\n[ina]\n', "training.aggregate_at: set by [ina]"),
    (TREE + 'aggregate_at = "root"\naggregate_via = ["leaf1:w1"]\n[ina]\n',
     "training.aggregate_at: set by [ina]"),
    (TREE + '[[jobs]]\n[[jobs]]\nps = "big"\nworkers = 2\n[ina]\n', "ina: one job only"),
])
def test_ina_refuses_what_it_cannot_aggregate(text, message):
    with pytest.raises(ScenarioError) as e:
        scenario(text)
    assert str(e.value).startswith(message)
    # the same scenario without [ina] is fine
    scenario(text.replace("[ina]\n", ""))


def test_ina_refuses_the_tcp_baseline():
    text = """
[topology]
kind = "bottleneck"
workers = 2

[run]
system = "tcp"

[training]
dataset = "synthetic"
key = "k"
"""
    assert scenario(text).system == "tcp"
    with pytest.raises(ScenarioError, match="^ina: in-network aggregation is ndnps's"):
        scenario(text + "\n[ina]\n")


# ---- the edge and the candidates ----------------------------------------------------------------

@pytest.mark.parametrize("topology, netns, edge, candidates", [
    ({"kind": "star", "workers": 3}, False, "fwd", []),
    ({"kind": "star", "workers": 3}, True, "h-ps", []),
    ({"kind": "tree", "workers": 4, "leaves": 2}, False, "root", ["leaf1", "leaf2"]),
    ({"kind": "tree", "workers": 6, "leaves": 3}, False, "root", ["leaf1", "leaf2", "leaf3"]),
    ({"kind": "tree", "workers": 4, "leaves": 2}, True, "h-ps", ["leaf1", "leaf2"]),
    ({"kind": "bottleneck", "workers": 3}, False, "ps-host", ["workers-host"]),
])
def test_edge_and_candidates(topology, netns, edge, candidates):
    d = doc(topology=topology, ina={})
    if netns:
        d["netns"] = {"enabled": True}
    sc = parse(d, "t")
    assert ina.edge(sc) == edge
    assert ina.candidates(sc) == candidates


def test_the_edge_in_namespaces_is_the_ps_hosts_forwarder():
    sc = parse(doc(topology={"kind": "tree", "workers": 2}, training={"key": "k", "ps": "boss"},
                   netns={"enabled": True}), "t")
    assert ina.edge(sc) == "h-boss"


# ---- the placement ------------------------------------------------------------------------------

def placed(overrides: list[str] | None = None):
    sc = load("ina", overrides)
    return sc, ina.place(sc, sc.ina)


def test_the_shipped_scenario_places_both_leaves():
    sc, plan = placed()
    assert (sc.topology, sc.workers, sc.leaves) == ("tree", 8, 2)
    assert sc.ina == ina.Ina(2, 400.0, 1024, 2.0, "greedy", 100.0)
    assert plan.edge == "root"
    assert plan.placement == ["leaf1", "leaf2"]
    assert plan.gamma == pytest.approx(100.0)
    assert plan.gamma_by_k.keys() == {0, 1, 2}
    assert [plan.gamma_by_k[k] for k in (0, 1, 2)] == pytest.approx([25.0, 25.0, 100.0])
    assert plan.aggregators == {"leaf1": ["w1", "w3", "w5", "w7"],
                                "leaf2": ["w2", "w4", "w6", "w8"]}
    assert plan.aggregate_via() == ["leaf1:w1+w3+w5+w7", "leaf2:w2+w4+w6+w8"]
    d = plan.as_dict()
    assert d["gamma_by_k"] == {"0": 25.0, "1": 25.0, "2": 100.0}
    assert d["edge"] == "root" and d["aggregators"] == plan.aggregators


@pytest.mark.parametrize("overrides", [['ina.placement="edge-only"'], ["ina.k=0"]])
def test_edge_only_places_no_aggregator(overrides):
    _, plan = placed(overrides)
    assert plan.edge == "root"
    assert plan.aggregators == {} and plan.placement == [] and plan.aggregate_via() == []
    assert plan.gamma == pytest.approx(25.0)      # 4 workers' gradients share each 100 Mbit/s link
    assert plan.gamma_by_k.keys() == {0}


def test_a_given_forwarder_sums_its_own_workers():
    # leaf1 summing does not raise γ (leaf2's link bounds it); of the plans with the best γ
    # the LP keeps the one that loads the links least, so the named forwarder is used
    _, plan = placed(['ina.placement=["leaf1"]'])
    assert plan.edge == "root" and plan.placement == ["leaf1"]
    assert plan.gamma == pytest.approx(25.0)      # leaf2's link still carries 4 gradients
    assert plan.aggregators == {"leaf1": ["w1", "w3", "w5", "w7"]}


def test_random_placement_is_reproducible_from_the_training_seed():
    chosen = {}
    for seed in range(6):
        over = ['ina.placement="random"', "ina.k=1", f"training.seed={seed}"]
        sc, plan = placed(over)
        assert len(plan.placement) == 1 and plan.placement[0] in ("leaf1", "leaf2")
        assert set(plan.aggregators) <= set(plan.placement)
        assert ina.place(sc, sc.ina).placement == plan.placement      # same seed, same choice
        assert placed(over)[1].placement == plan.placement
        chosen[seed] = plan.placement[0]
    assert set(chosen.values()) == {"leaf1", "leaf2"}                # the seed decides
    # k beyond the candidates takes them all
    _, plan = placed(['ina.placement="random"', "ina.k=5"])
    assert plan.placement == ["leaf1", "leaf2"] and plan.gamma == pytest.approx(100.0)


def test_a_star_places_no_aggregator():
    sc = scenario("""
[topology]
kind = "star"
workers = 3

[training]
key = "k"

[ina]
k = 2
""")
    plan = ina.place(sc, sc.ina)
    assert plan.edge == "fwd" and plan.aggregators == {} and plan.placement == []


def test_the_bottleneck_aggregates_behind_the_link():
    sc = load("bottleneck", ["ina.k=1"])
    plan = ina.place(sc, sc.ina)
    assert plan.edge == "ps-host"
    assert plan.placement == ["workers-host"]
    assert plan.aggregators == {"workers-host": [f"w{i}" for i in range(1, 9)]}
    # k = 0: 8 gradients share the 100 Mbit/s link; k = 1: the workers host sums 400 Mbit/s,
    # 50 from each, and the rest shares what the sums leave of the link: 50 + 50 / 8
    assert plan.gamma_by_k[0] == pytest.approx(12.5)
    assert plan.gamma == pytest.approx(56.25) == plan.gamma_by_k[1]
    # the PS's edge has no worker of its own: the PS asks the workers host directly (its sum
    # float32, no sub-group), and only it is configured
    assert plan.direct and plan.root == "workers-host" and plan.idle == {}
    assert plan.aggregate_via() == [] and plan.configured() == ["workers-host"]
    assert plan.as_dict()["root"] == "workers-host"
    assert any("asks workers-host directly" in n for n in plan.notes())


@pytest.mark.parametrize("rate", [10.0, 100.0, 1000.0, 10_000.0])
@pytest.mark.parametrize("capacity", [50.0, 400.0, 1e5])
@pytest.mark.parametrize("workers", [4, 16])
def test_the_bottleneck_sums_on_the_workers_side_at_every_rate_and_capacity(rate, capacity,
                                                                            workers):
    # the edge is one of our forwarders too (the same capacity: summing there is no cheaper),
    # and every gradient is summed somewhere: behind the link is never worse. (Where the edge
    # was taken as unbounded, 1 Gbit/s over a 400 Mbit/s aggregator sent every worker's
    # larger share to the edge: every gradient crossed the link, summed at the PS's host.)
    sc = load("bottleneck", ["ina.k=1", f"bottleneck.rate_mbps={rate}",
                             f"ina.capacity={capacity}", f"topology.workers={workers}"])
    plan = ina.place(sc, sc.ina)
    assert plan.aggregators == {"workers-host": list(sc.training.who.workers)}
    assert plan.direct and plan.idle == {}


def test_an_aggregator_given_no_worker_says_why():
    # fat-tree:4, k = 3: γ reaches the links' 100 Mbit/s with two of the three aggregators
    # greedy chose; the third is sent half a worker's gradient at most, never the larger share
    sc = load("ina-fat-tree")
    plan = ina.place(sc, sc.ina)
    assert len(plan.placement) == 3 and set(plan.idle) == set(plan.placement) - set(
        plan.aggregators) != set()
    for node, why in plan.idle.items():
        assert "never a worker's larger share" in why and "more would not raise γ" in why
        assert any(n.startswith(f"in-network aggregation: the placement chose {node} and gave "
                                "it no worker: ") for n in plan.notes())
    assert plan.as_dict()["idle"] == plan.idle and not plan.direct
    # an aggregator at its capacity says so
    from ndnps.placement.lp import Solution
    sol = Solution(10.5, ["a"], {"w1": "edge", "w2": "edge"},
                   {"w1": {"a": 5.0, "edge": 5.5}, "w2": {"a": 5.0, "edge": 5.5}})
    why = ina._idle_reason("a", sol, ina.Ina(capacity=10.0))
    assert why.startswith("the LP sends it at most 5 Mbit/s of a worker's γ = 10.5")
    assert why.endswith("it takes all it may, ina.capacity = 10 Mbit/s")


def test_the_network_follows_the_topology():
    sc = load("ina")
    net = ina.network(sc, sc.ina)
    assert net.switches == ["root", "leaf1", "leaf2"]
    assert net.hosts == ["ps", *(f"w{i}" for i in range(1, 9))]
    assert net.edge_of("ps") == "root" and net.edge_of("w3") == "leaf1"
    assert net.capacity("leaf1", "root") == pytest.approx(100.0)       # ina.link_mbps
    bsc = load("bottleneck", ["ina.k=1", "bottleneck.rate_mbps=20"])
    bnet = ina.network(bsc, bsc.ina)
    assert bnet.capacity("ps-host", "workers-host") == pytest.approx(20.0)


# ---- the training's aggregate_at / aggregate_via ------------------------------------------------

@pytest.mark.parametrize("scenario_name, overrides", [
    ("ina", None), ("ina", ['ina.placement="edge-only"']), ("ina", ['ina.placement=["leaf1"]']),
    ("bottleneck", ["ina.k=1"]),
])
def test_the_placement_is_a_valid_training_plan(scenario_name, overrides):
    sc = load(scenario_name, overrides)
    plan = ina.place(sc, sc.ina)
    t = sc.training.with_values(aggregate_at=plan.root, aggregate_via=plan.aggregate_via())
    assert t.aggregation.groups() == ({} if plan.direct else plan.aggregators)
    assert plan.configured()[0] == plan.root


def training(**kw) -> TrainingSpec:
    base = {"workers": ["w1", "w2", "w3", "w4"], "key": "k", "aggregate_at": "root"}
    return from_table({**base, **kw})


def test_a_hand_written_plan_is_accepted():
    t = training(aggregate_via=["leaf1:w1+w3", "leaf2:w2"])
    assert t.aggregation.groups() == {"leaf1": ["w1", "w3"], "leaf2": ["w2"]}
    assert training().aggregation.groups() == {}


@pytest.mark.parametrize("kw, message", [
    ({"aggregate_via": ["leaf1:w1+w9"]}, "training.aggregate_via[0]: 'w9' is not one"),
    ({"aggregate_via": ["leaf1:w1", "leaf2:w2+w1"]},
     "training.aggregate_via[1]: worker 'w1' in two groups"),
    ({"aggregate_via": ["leaf1:w1+w1"]}, "training.aggregate_via[0]: worker 'w1' in two"),
    ({"aggregate_via": ["leaf1:w1", "leaf1w2"]}, "training.aggregate_via[1]: expected"),
    ({"aggregate_via": ["leaf1:"]}, "training.aggregate_via[0]: expected"),
    ({"aggregate_via": ["leaf1:w1", "leaf1:w2"]}, "training.aggregate_via[1]: node 'leaf1'"),
    ({"aggregate_via": ["root:w1"]}, "training.aggregate_via[0]: node 'root'"),
    ({"aggregate_via": ["leaf/1:w1"]}, "training.aggregate_via[0]: aggregate_via[0] 'leaf/1'"),
    ({"aggregate_at": "", "aggregate_via": ["leaf1:w1"]},
     "training.aggregate_via: needs aggregate_at"),
    ({"mode": "async"}, "training.aggregate_at: in-network aggregation needs mode"),
    ({"key": ""}, "training.aggregate_at: in-network aggregation needs key"),
])
def test_a_bad_plan_is_refused_naming_the_entry(kw, message):
    with pytest.raises(ConfigError) as e:
        training(**kw)
    assert str(e.value).startswith(message)


@pytest.mark.parametrize("topology, groups", [
    ({"kind": "star", "workers": 3}, {"fwd": ["w1", "w2", "w3"]}),
    ({"kind": "tree", "workers": 4, "leaves": 2},
     {"leaf1": ["w1", "w3"], "leaf2": ["w2", "w4"]}),
])
def test_in_namespaces_the_router_edge_sums_what_goes_to_the_edge(topology, groups):
    # the PS asks its own host forwarder (h-ps); the router the LP takes for the PS's edge
    # (fwd, root) is where the plan's "edge" workers are summed
    d = doc(topology=topology, ina={"link_mbps": 100})
    d["netns"] = {"enabled": True}
    sc = parse(d, "t")
    plan = ina.place(sc, sc.ina)
    assert plan.edge == "h-ps" and plan.aggregators == groups
    d["ina"] = {"link_mbps": 100, "placement": "edge-only"}
    sc = parse(d, "t")
    edge_router = "fwd" if topology["kind"] == "star" else "root"
    assert ina.place(sc, sc.ina).aggregators == {edge_router: list(sc.training.who.workers)}


def test_a_placement_list_names_each_forwarder_once():
    with pytest.raises(ScenarioError, match="^ina.placement: a forwarder named twice"):
        parse(doc(topology={"kind": "tree", "workers": 4, "leaves": 2},
                  ina={"placement": ["leaf1", "leaf1"]}), "t")


def test_more_workers_than_one_plan_holds_are_refused_naming_the_key_not_a_set_alone(
        monkeypatch):
    # a plan sums at most MAX_MEMBERS (1,024: a k = 16 fat-tree's hosts); with a smaller bound
    # the error is the pair's, not "workers within [1, 64]" of the file's k = 4 alone
    monkeypatch.setattr(ina, "MAX_MEMBERS", 256)
    with pytest.raises(ScenarioError, match=r"topology.workers: in-network aggregation sums "
                                            r"at most 256 workers under one plan, got 300"):
        load("ina-fat-tree", ["topology.k=16", "topology.workers=300"])
    assert len(load("ina-fat-tree", ["topology.k=16", "topology.workers=256"]).worker_names) \
        == 256
