"""PS-less training in a scenario (training.collective): what the spec refuses (each
error naming the key), the defaults it takes from the topology, the training configuration's
own checks, and the plans — no PS app, every peer an app of role "peer", routes from every
peer to every other (a local star, tree and BCube fabric; netns hosts)."""
from __future__ import annotations

import pytest

from ndnps.lab import topology
from ndnps.lab.spec import ScenarioError, load, parse
from ndnps.protocol.config import ConfigError, from_table
from tests.support.plans import walk

PEERS = ["w1", "w2", "w3", "w4"]


def doc(topo: dict | None = None, training: dict | None = None, **more) -> dict:
    """A four-peer ring on a star, with `topo` and `training` keys replaced."""
    return {"topology": {"kind": "star", "workers": 4, **(topo or {})},
            "training": {"key": "k", "collective": "ring", **(training or {})}, **more}


def every_peer_reaches_every_other(plan) -> None:
    at = {a.name: a.forwarder for a in plan.apps}
    for p, here in at.items():
        for q, there in at.items():
            if p != q:
                assert walk(plan, here, f"/{q}", there)[-1] == there


# ---- refusals ------------------------------------------------------------------------------

@pytest.mark.parametrize("document, key", [
    (doc(jobs=[{"collective": "bcube", "workers": PEERS}, {"ps": "other", "workers": ["x", "y"]}]),
     "jobs"),
    (doc({"kind": "bottleneck"}, {"dataset": "synthetic"}, run={"system": "tcp"}),
     "run.system"),
    (doc({"kind": "bottleneck"}), "topology.kind"),
    (doc({"kind": "bcube", "n": 2, "k": 3}, {"collective": "bcube"}), "training.bcube_n"),
    (doc({"kind": "bcube", "n": 2, "k": 2}, {"collective": "bcube", "bcube_n": 4}),
     "training.bcube_n"),
    (doc(training={"collective": "ina", "aggregate_at": "root"}), "training.aggregate_at"),
    (doc({"kind": "tree"}, {"collective": "ina", "aggregate_at": "nowhere"}),
     "training.aggregate_at"),
    (doc(training={"collective": "ina"}, ina={}), "ina"),
    (doc(workers={"slowdown": {"w2": 2.0}}), "workers.slowdown"),
    (doc(faults={"kill": [{"ps": True, "at_version": 3, "restart_after": 1.0}]}),
     "faults.kill[0].ps"),
    (doc(faults={"kill": [{"worker": "w3", "at_version": 2},
                          {"worker": "w2", "at_version": 3, "restart_after": 1.0}]}),
     "faults.kill[1].restart_after"),
], ids=["several-jobs", "tcp-baseline", "bottleneck", "bcube-levels", "bcube-n",
        "ina-not-a-forwarder", "ina-not-a-tree-forwarder", "ina-table", "slowdown", "kill-ps",
        "kill-restart"])
def test_what_ps_less_training_cannot_do_is_refused_naming_the_key(document, key):
    with pytest.raises(ScenarioError) as e:
        parse(document, "bad")
    assert str(e.value).startswith(f"{key}: "), str(e.value)


@pytest.mark.parametrize("faults, key", [
    ({"random": {"kills": 1, "restart_after": 1.0}}, "faults.random.restart_after"),
    ({"kill": [{"ps": True, "at_version": 3}]}, "faults.kill[0].ps"),
], ids=["random-restart", "kill-ps-without-restart"])
def test_fault_refusals_name_the_key_written(faults, key):
    with pytest.raises(ScenarioError) as e:
        parse(doc(faults=faults), "bad")
    assert str(e.value).startswith(f"{key}: "), str(e.value)


@pytest.mark.parametrize("training, key", [
    ({"mode": "async"}, "training.collective"),
    ({"collective": "bcube", "workers": ["a", "b", "c"]}, "training.workers"),
    ({"collective": "tree"}, "training.collective"),
    ({"bcube_n": 1}, "training.bcube_n"),
])
def test_the_scenario_reports_the_training_configurations_errors(training, key):
    with pytest.raises(ScenarioError, match=f"^{key}: "):
        parse(doc({"workers": len(training.get("workers", PEERS))}, training), "bad")


def test_a_killed_peer_without_restart_and_a_forwarder_restart_are_accepted():
    sc = parse(doc(faults={"kill": [{"worker": "w2", "at_version": 5},
                                    {"forwarder": "fwd", "at_version": 7,
                                     "restart_after": 1.0}]}), "ok")
    assert [(k.worker, k.role, k.restart_after) for k in sc.kills] == [
        ("w2", "worker", None), ("fwd", "forwarder", 1.0)]


# ---- the training configuration's own checks ------------------------------------------------

@pytest.mark.parametrize("table, message", [
    ({"collective": "ring", "mode": "async"},
     "training.collective: PS-less training is sync"),
    ({"collective": "bcube", "workers": ["a", "b", "c"]},
     "training.workers: BCube(n=2, k) needs n^k peers, got 3"),
    ({"collective": "bcube", "bcube_n": 3, "workers": ["a", "b", "c", "d"]},
     "training.workers: BCube(n=3, k) needs n^k peers, got 4"),
    ({"collective": "ina", "workers": PEERS},
     "training.collective: \"ina\" needs aggregate_at"),
    ({"collective": "ring", "bcube_n": 1}, "training.bcube_n: must be >= 2"),
])
def test_training_config_refuses_what_a_collective_cannot_do(table, message):
    with pytest.raises(ConfigError) as e:
        from_table(table)
    assert str(e.value).startswith(message), str(e.value)


def test_training_config_collective_levels_and_recorder():
    ps = from_table({"workers": PEERS})
    assert ps.peers.collective == "" and ps.recorder == "ps"
    cube = from_table({"collective": "bcube", "workers": [f"p{i}" for i in range(8)]})
    assert (cube.peers.bcube_n, cube.bcube_levels(), cube.recorder) == (2, 3, "p0")
    nine = from_table({"collective": "bcube", "bcube_n": 3,
                       "workers": [f"p{i}" for i in range(9)]})
    assert nine.bcube_levels() == 2
    ring = from_table({"collective": "ring", "workers": ["a", "b", "c"]})    # any number
    assert ring.recorder == "a"
    ina = from_table({"collective": "ina", "aggregate_at": "fwd", "workers": PEERS,
                      "key": "k"})
    assert ina.aggregation.aggregate_at == "fwd"


# ---- defaults from the topology --------------------------------------------------------------

def test_bcube_n_comes_from_a_bcube_topology():
    sc = parse(doc({"kind": "bcube", "n": 3, "k": 2, "workers": 9}, {"collective": "bcube"}),
               "bc")
    assert (sc.training.peers.bcube_n, sc.training.bcube_levels()) == (3, 2)
    sc = parse(doc({"kind": "bcube", "n": 2, "k": 3, "workers": 8}, {"collective": "bcube"}),
               "bc")
    assert (sc.training.peers.bcube_n, sc.training.bcube_levels()) == (2, 3)
    # a BCube schedule over a star: bcube_n as given (2 by default)
    sc = parse(doc({"workers": 9}, {"collective": "bcube", "bcube_n": 3}), "bc")
    assert (sc.training.peers.bcube_n, sc.topology) == (3, "star")


def test_ina_on_a_star_aggregates_at_its_forwarder_unless_told():
    sc = parse(doc(training={"collective": "ina"}), "ina")
    assert sc.training.aggregation.aggregate_at == "fwd"
    sc = parse(doc({"kind": "tree"}, {"collective": "ina", "aggregate_at": "leaf2"}), "ina")
    assert sc.training.aggregation.aggregate_at == "leaf2"
    # a ring has no aggregator
    assert parse(doc(), "ring").training.aggregation.aggregate_at == ""


@pytest.mark.parametrize("name, kind, peers, collective", [
    ("ring", "star", 8, "ring"), ("ina-allreduce", "star", 8, "ina"),
    ("bcube", "bcube", 9, "bcube"),
])
def test_the_builtin_scenarios_parse(name, kind, peers, collective):
    sc = load(name)
    assert (sc.topology, len(sc.training.who.workers), sc.training.peers.collective) == \
        (kind, peers, collective)
    assert sc.training.update.mode == "sync" and sc.training.recorder == "w1"
    if collective == "ina":
        assert sc.training.aggregation.aggregate_at == "fwd"
    if collective == "bcube":
        assert (sc.training.peers.bcube_n, sc.training.bcube_levels()) == (sc.n, sc.k) == (3, 2)
    # the bcube scenario's documented variant
    small = load("bcube", ["topology.n=2", "topology.k=3", "topology.workers=8"])
    assert small.training.peers.bcube_n == 2 and small.training.bcube_levels() == 3


# ---- plans: no PS, peers, routes -------------------------------------------------------------

def check_peers(plan, peers: list[str]) -> None:
    assert [(a.name, a.role) for a in plan.apps] == [(p, "peer") for p in peers]
    assert "ps" not in {a.name for a in plan.apps}


def test_a_local_star_has_only_peers_on_its_forwarder():
    sc = parse(doc(), "star")
    plan = topology.plan_local(sc)
    check_peers(plan, PEERS)
    assert {a.forwarder for a in plan.apps} == {"fwd"} and list(plan.forwarders) == ["fwd"]


@pytest.mark.parametrize("leaves", [2, 3])
def test_a_local_tree_routes_every_peer_to_every_other_through_the_root(leaves):
    sc = parse(doc({"kind": "tree", "workers": 6, "leaves": leaves}), "tree")
    peers = [f"w{i}" for i in range(1, 7)]
    plan = topology.plan_local(sc)
    check_peers(plan, peers)
    at = {a.name: a.forwarder for a in plan.apps}
    assert set(at.values()) == {f"leaf{i + 1}" for i in range(leaves)}
    every_peer_reaches_every_other(plan)
    # the root reaches each peer's leaf; a leaf sends the other leaves' peers to the root
    for p, leaf in at.items():
        assert (f"/{p}", leaf) in plan.forwarders["root"].routes
        for other in plan.forwarders:
            if other.startswith("leaf") and other != leaf:
                assert (f"/{p}", "root") in plan.forwarders[other].routes
    assert walk(plan, at["w1"], "/w2", at["w2"]) == [at["w1"], "root", at["w2"]]


@pytest.mark.parametrize("n, k", [(2, 2), (3, 2), (2, 3)])
def test_a_bcube_fabric_puts_peer_i_on_host_i_and_routes_every_pair(n, k):
    peers = [f"w{i + 1}" for i in range(n ** k)]
    sc = parse(doc({"kind": "bcube", "n": n, "k": k, "workers": n ** k},
                   {"collective": "bcube"}), "bc")
    plan = topology.plan_local(sc)
    check_peers(plan, peers)
    assert [a.forwarder for a in plan.apps] == [f"p{i}" for i in range(n ** k)]
    every_peer_reaches_every_other(plan)
    # peers differing in one digit: one switch between them (the level of that digit)
    assert walk(plan, "p0", "/w2", "p1") == ["p0", "s0-0", "p1"]
    assert walk(plan, "p0", f"/w{n + 1}", f"p{n}") == ["p0", "s1-0", f"p{n}"]


def test_a_ring_on_a_bcube_fabric_is_routed_too():
    sc = parse(doc({"kind": "bcube", "n": 2, "k": 2}), "ring-bc")
    plan = topology.plan_local(sc)
    check_peers(plan, PEERS)
    every_peer_reaches_every_other(plan)


@pytest.mark.parametrize("kind", ["star", "tree"])
@pytest.mark.parametrize("collective", ["ring", "ina"])
def test_netns_hosts_route_the_other_peers_and_the_aggregator_to_their_router(kind,
                                                                               collective):
    training = {"collective": collective}
    if collective == "ina" and kind == "tree":
        training["aggregate_at"] = "root"
    sc = parse(doc({"kind": kind}, training, netns={"enabled": True}), "ns")
    plan = topology.plan_hosts(sc)
    check_peers(plan, PEERS)
    assert [a.forwarder for a in plan.apps] == [f"h-{p}" for p in PEERS]
    routers = {h: r for h, r in plan.host_links if h.startswith("h-")}
    assert sorted(routers) == [f"h-{p}" for p in PEERS]
    assert set(routers.values()) == ({"fwd"} if kind == "star" else {"leaf1", "leaf2"})
    for p in PEERS:
        host, router = f"h-{p}", routers[f"h-{p}"]
        routes = plan.forwarders[host].routes
        expected = [(f"/{q}", router) for q in PEERS if q != p]
        if collective == "ina":
            expected.append((f"/{sc.training.aggregation.aggregate_at}", router))
        assert routes == expected
        assert (f"/{p}", host) in plan.forwarders[router].routes
    every_peer_reaches_every_other(plan)


@pytest.mark.parametrize("topo, aggregate_at, netns", [
    ({"kind": "tree"}, "root", False),
    ({"kind": "tree"}, "leaf2", False),
    ({"kind": "tree"}, "root", True),
    ({"kind": "bcube", "n": 2, "k": 2}, "s0-0", False),
], ids=["tree-root", "tree-leaf", "netns-tree-root", "bcube-switch"])
def test_every_peer_reaches_the_aggregator_off_a_star(topo, aggregate_at, netns):
    sc = parse(doc(topo, {"collective": "ina", "aggregate_at": aggregate_at},
                   **({"netns": {"enabled": True}} if netns else {})), "ina")
    plan = topology.plan_hosts(sc) if netns else topology.plan_local(sc)
    for app in plan.apps:
        assert walk(plan, app.forwarder, f"/{aggregate_at}", aggregate_at)[-1] == aggregate_at


def test_on_a_star_the_aggregator_is_every_peers_own_forwarder():
    sc = parse(doc(training={"collective": "ina"}), "ina")
    plan = topology.plan_local(sc)
    assert {a.forwarder for a in plan.apps} == {sc.training.aggregation.aggregate_at} == {"fwd"}
    ns = topology.plan_hosts(parse(doc(training={"collective": "ina"},
                                       netns={"enabled": True}), "ina"))
    for app in ns.apps:
        assert walk(ns, app.forwarder, "/fwd", "fwd") == [app.forwarder, "fwd"]


def test_a_bcube_cannot_re_form_and_ring_and_ina_can():
    with pytest.raises(ScenarioError, match="^training.on_peer_loss: a BCube cannot re-form"):
        parse(doc({"kind": "bcube", "n": 2, "k": 2},
                  {"collective": "bcube", "on_peer_loss": "re-form"}), "bad")
    for collective in ("ring", "ina"):
        sc = parse(doc(training={"collective": collective, "on_peer_loss": "re-form"},
                       faults={"kill": [{"worker": "w2", "at_version": 5}]}), "ok")
        assert sc.training.peers.on_peer_loss == "re-form" and sc.kills[0].worker == "w2"
