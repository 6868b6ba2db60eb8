"""A fat-tree in a scenario (ndnps/lab/fabric.py): the spec's checks, the forwarders and their
faces, apps on their hosts' edge switches, routes that reach every app and aggregator, and the
placement on it."""
from __future__ import annotations

import tomllib

import pytest

from ndnps.lab import fabric, ina, topology
from ndnps.lab.spec import ScenarioError, load, parse
from tests.support.plans import walk

FAT = """
[topology]
kind = "fat-tree"
k = 4
workers = 8

[training]
key = "k"
"""


def scenario(text: str = FAT, **topo):
    doc = tomllib.loads(text)
    doc["topology"].update(topo)
    return parse(doc, "fat")


@pytest.mark.parametrize("topo, why", [
    ({"k": 3}, "^topology.k: a fat-tree's k must be even"),
    ({"k": 18}, r"^topology.k: must be within \[2, 16\]"),
    ({"workers": 17}, "^topology.workers: this fat-tree has 16 hosts, the run needs 17"),
    ({"workers": 65}, r"^topology.workers: must be within \[1, 64\]"),
    ({"spines": 2}, "^topology.spines: applies to kind = \"leaf-spine\" only"),
])
def test_the_spec_checks_a_fat_tree(topo, why):
    with pytest.raises(ScenarioError, match=why):
        scenario(**topo)


def test_a_fat_tree_runs_locally_only():
    with pytest.raises(ScenarioError, match="^topology.kind: a fat-tree runs locally"):
        parse({**tomllib.loads(FAT), "netns": {"enabled": True}}, "fat")


def test_every_switch_a_forwarder_every_app_at_its_edge_every_route_arrives():
    sc = scenario()
    plan = topology.plan_local(sc)
    assert len(plan.forwarders) == 20
    links = sum(len(n.faces) for n in plan.forwarders.values())
    assert links == 2 * 32                       # 16 core-aggregation + 16 aggregation-edge
    at = {a.name: a.forwarder for a in plan.apps}
    assert at == {"ps": "e1-1", "w1": "e1-1", "w2": "e1-2", "w3": "e1-2", "w4": "e2-1",
                  "w5": "e2-1", "w6": "e2-2", "w7": "e2-2", "w8": "e3-1"}
    for app, edge in at.items():
        for f in plan.forwarders:
            path = walk(plan, f, f"/{app}", edge)
            assert len(path) <= 5                # at most 4 hops between switches
    # faces name peers that exist and join both ways
    for name, node in plan.forwarders.items():
        for face in node.faces:
            assert any(f.name == name for f in plan.forwarders[face.name].faces)


def test_the_ina_fat_tree_scenario_places_and_routes_its_aggregators():
    sc = load("ina-fat-tree")
    assert sc.topology == "fat-tree" and sc.ina.k == 3
    assert ina.edge(sc) == "e1-1" and len(ina.candidates(sc)) == 19
    plan = ina.place(sc, sc.ina)
    assert plan.gamma_by_k[0] < plan.gamma_by_k[1] < plan.gamma_by_k[2]
    assert plan.aggregators and set(plan.aggregators) <= set(plan.placement)
    grouped = [w for ws in plan.aggregators.values() for w in ws]
    assert len(grouped) == len(set(grouped)) and set(grouped) <= set(sc.training.who.workers)
    net_plan = topology.plan_local(sc)
    topology.route_aggregators(net_plan, sc, list(plan.aggregators))
    for node in plan.aggregators:
        assert walk(net_plan, "e1-1", f"/{node}", node)[-1] == node


def test_the_placement_network_names_hosts_after_the_apps():
    sc = scenario(workers=3)
    net = fabric.network(sc, 100.0)
    assert net.hosts == ["ps", "w1", "w2", "w3"] and len(net.switches) == 20
    assert net.edge_of("w2") == "e1-2" and net.capacity("ps", "e1-1") == 100.0


BCUBE = """
[topology]
kind = "bcube"
n = 3
k = 2
workers = 8

[training]
key = "k"
"""


def test_a_bcube_gives_every_peer_its_own_forwarder_with_an_uplink_per_level():
    sc = parse(tomllib.loads(BCUBE), "bc")
    plan = topology.plan_local(sc)
    switches = [f"s{lvl}-{i}" for lvl in range(2) for i in range(3)]
    assert sorted(plan.forwarders) == sorted(switches + [f"p{i}" for i in range(9)])
    for i in range(9):
        assert len(plan.forwarders[f"p{i}"].faces) == 2
    at = {a.name: a.forwarder for a in plan.apps}
    assert at == {"ps": "p0", **{f"w{i}": f"p{i}" for i in range(1, 9)}}
    # every forwarder reaches every app, through the peers' forwarders where a path needs it
    for app, host in at.items():
        for f in plan.forwarders:
            assert walk(plan, f, f"/{app}", host)[-1] == host
    # p0 and p4 differ in both digits: two switches, one relaying peer between them
    assert len(walk(plan, "p0", "/w4", "p4")) == 5


def test_a_bcube_checks_its_size_and_refuses_ina():
    with pytest.raises(ScenarioError, match="^topology.workers: this bcube has 9 hosts"):
        scenario(BCUBE, workers=10)
    # n^k workers: the PS shares the first host with the first worker
    full = topology.plan_local(parse(tomllib.loads(BCUBE.replace("workers = 8", "workers = 9")),
                                     "bc"))
    assert {a.name: a.forwarder for a in full.apps if a.name in ("ps", "w1", "w9")} == \
        {"ps": "p0", "w1": "p0", "w9": "p8"}
    with pytest.raises(ScenarioError, match="^ina: not on a bcube"):
        parse({**tomllib.loads(BCUBE), "ina": {}}, "bc")
    small = BCUBE.replace("k = 2", "k = 3").replace("n = 3", "n = 2").replace("workers = 8",
                                                                              "workers = 7")
    sc = parse(tomllib.loads(small), "bc")
    assert (sc.n, sc.k) == (2, 3) and len(topology.plan_local(sc).forwarders) == 12 + 8


@pytest.mark.parametrize("n, k", [(2, 2), (2, 3), (3, 2), (3, 3), (4, 2)])
def test_a_ring_on_a_bcube_goes_round_its_hosts_one_switch_at_a_time(n, k):
    from ndnps.lab.fabric import gray_ring
    order = gray_ring(n, k)
    assert sorted(order) == list(range(n ** k))
    for a, b in zip(order, order[1:] + order[:1]):
        assert sum(a // n ** j % n != b // n ** j % n for j in range(k)) == 1


def test_ring_peers_are_placed_along_the_gray_code_bcube_peers_by_address():
    doc = tomllib.loads(BCUBE.replace("workers = 8", "workers = 9"))
    doc["training"]["collective"] = "ring"
    plan = topology.plan_local(parse(doc, "ring"))
    assert [a.forwarder for a in plan.apps] == ["p0", "p1", "p2", "p5", "p3", "p4", "p7",
                                                "p8", "p6"]
    for a, b in zip(plan.apps, plan.apps[1:] + plan.apps[:1]):     # neighbours: one switch
        assert len(walk(plan, a.forwarder, f"/{b.name}", b.forwarder)) == 3
    doc["training"]["collective"] = "bcube"
    plan = topology.plan_local(parse(doc, "bcube"))
    assert [a.forwarder for a in plan.apps] == [f"p{i}" for i in range(9)]


def test_a_bcube_in_namespaces_has_a_host_per_forwarder_and_a_veth_per_link():
    doc = tomllib.loads(BCUBE.replace("workers = 8", "workers = 9"))
    doc["netns"] = {"enabled": True}
    sc = parse(doc, "bc")
    plan = topology.plan_hosts(sc)
    assert all(node.host == name for name, node in plan.forwarders.items())
    assert len(plan.forwarders) == 6 + 9 and len(plan.host_links) == 2 * 9
    assert {(a[0], b[0]) for a, b in plan.host_links} == {("p", "s")}
    assert all(not node.faces for node in plan.forwarders.values())   # made on the veths
    at = {a.name: a.forwarder for a in plan.apps}
    assert at["ps"] == "p0" and at["w9"] == "p8"
    # routes as locally: p0 reaches w9 (p8: both digits differ) through a switch, a host, a switch
    local = topology.plan_local(parse(tomllib.loads(BCUBE.replace("workers = 8", "workers = 9")),
                                      "bc"))
    for name, node in plan.forwarders.items():
        assert sorted(node.routes) == sorted(local.forwarders[name].routes)


def test_every_host_trains_the_ps_beside_the_first_worker():
    sc = scenario(workers=16)
    net = fabric.network(sc, 100.0)
    assert net.hosts[:2] == ["ps", "w1"] and len(net.hosts) == 17
    plan = topology.plan_local(sc, port=iter(range(7000, 8000)).__next__)
    at = {a.name: a.forwarder for a in plan.apps}
    assert at["ps"] == at["w1"] == "e1-1" and at["w16"] == "e4-2"
    assert sorted(n.udp for n in plan.forwarders.values()) == list(range(7000, 7020))


LEAF_SPINE = """
[topology]
kind = "leaf-spine"
spines = 2
leaves = 4
hosts_per_leaf = 2
workers = 6

[training]
key = "k"
"""


def test_a_leaf_spine_takes_its_keys_with_defaults():
    sc = scenario(LEAF_SPINE)
    assert (sc.spines, sc.leaves, sc.hosts_per_leaf) == (2, 4, 2)
    doc = tomllib.loads(LEAF_SPINE)
    doc["topology"] = {"kind": "leaf-spine"}
    sc = parse(doc, "ls")
    assert (sc.spines, sc.leaves, sc.hosts_per_leaf, sc.workers) == (2, 4, 4, 4)
    # as many workers as hosts, up to the fabric's (past 64), the PS beside the first
    big = scenario(LEAF_SPINE, spines=4, leaves=32, hosts_per_leaf=4, workers=128)
    assert len(fabric.network(big, 1.0).hosts) == 129


@pytest.mark.parametrize("topo, why", [
    ({"spines": 0}, r"^topology.spines: must be within \[1, 64\]"),
    ({"leaves": 129}, r"^topology.leaves: must be within \[1, 128\]"),
    ({"hosts_per_leaf": "2"}, "^topology.hosts_per_leaf: expected an integer"),
    ({"workers": 9}, "^topology.workers: this leaf-spine has 8 hosts, the run needs 9"),
    ({"workers": 65}, r"^topology.workers: must be within \[1, 64\]"),
    ({"sp1nes": 2}, "^topology.sp1nes: unknown key"),
])
def test_the_spec_checks_a_leaf_spine(topo, why):
    doc = tomllib.loads(LEAF_SPINE)
    doc["topology"].update(topo)
    with pytest.raises(ScenarioError, match=why):
        parse(doc, "ls")
    with pytest.raises(ScenarioError, match="^topology.kind: a leaf-spine runs locally"):
        parse({**tomllib.loads(LEAF_SPINE), "netns": {"enabled": True}}, "ls")


def test_a_leaf_spine_plan_every_switch_a_forwarder_every_app_reached():
    sc = scenario(LEAF_SPINE)
    plan = topology.plan_local(sc)
    assert sorted(plan.forwarders) == ["l1", "l2", "l3", "l4", "s1", "s2"]
    assert topology.router_names(sc) == ["s1", "s2", "l1", "l2", "l3", "l4"]
    for name, node in plan.forwarders.items():
        assert sorted(f.name for f in node.faces) == \
            (["s1", "s2"] if name.startswith("l") else ["l1", "l2", "l3", "l4"])
    at = {a.name: a.forwarder for a in plan.apps}
    assert at == {"ps": "l1", "w1": "l1", "w2": "l2", "w3": "l2", "w4": "l3", "w5": "l3",
                  "w6": "l4"}
    net = fabric.network(sc, 1.0)
    for app, leaf in at.items():
        for f in plan.forwarders:
            path = walk(plan, f, f"/{app}", leaf)
            assert len(path) <= 3                      # leaf, spine, leaf
            if f != leaf:                              # the hop the LP's paths take
                assert path[1] == net.path(f, leaf)[0][1]


def test_the_leaf_spine_scenario_places_and_routes_its_aggregators():
    sc = load("leaf-spine")
    assert sc.topology == "leaf-spine" and sc.ina is not None
    assert ina.edge(sc) == "l1" and ina.candidates(sc) == ["s1", "s2", "l2", "l3", "l4"]
    plan = ina.place(sc, sc.ina)
    assert plan.aggregators and set(plan.aggregators) <= set(plan.placement)
    net_plan = topology.plan_local(sc)
    topology.route_aggregators(net_plan, sc, list(plan.aggregators))
    for node in plan.aggregators:
        for f in net_plan.forwarders:
            assert walk(net_plan, f, f"/{node}", node)[-1] == node


def test_a_k16_fat_tree_with_1024_workers_plans_every_route():
    """The simulator's scale: 320 forwarders, 1,024 workers (the PS beside w1), every app
    routed from every forwarder, the ports made up (none bound)."""
    sc = scenario(k=16, workers=1024)
    ports = iter(range(20000, 30000))
    plan = topology.plan_local(sc, port=lambda: next(ports))
    assert len(plan.forwarders) == 320 and len(plan.apps) == 1025
    at = {a.name: a.forwarder for a in plan.apps}
    for name, node in plan.forwarders.items():
        faces = {f.name for f in node.faces}
        routed = {prefix: face for prefix, face in node.routes}
        assert len(routed) == len(node.routes)        # one route each
        assert set(routed) == {f"/{a}" for a, f in at.items() if f != name}
        assert set(routed.values()) <= faces
    assert walk(plan, "e1-1", "/w1024", "e16-8")[-1] == "e16-8"
