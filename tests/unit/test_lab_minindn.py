"""A Mini-NDN topology file as a scenario's topology (`[topology] file`, ndnps/lab/minindn.py):
the table and its errors, where the apps go, each link's own conditions on the faces (and with
--netns on tbf), the routes — the paths `[ina]`'s LP plans with — and the placement on it."""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ndnps.lab import ina, minindn, topology
from ndnps.lab.netns import Link as Veth
from ndnps.lab.spec import ScenarioError, load, parse, router_names

# the PS's node a behind a slow link to r; three worker nodes beyond r; s, a layer-2 switch
FAN = """\
# a fan-in, written as Mini-NDN writes its files
[nodes]
a: _ network=/world router=/a.Router/
r: _ radius=1.2 angle=0.5
x: _ radius=1 angle=0.5
y: _
z: _
[switches]
s: _
[links]
a:r delay=5ms bw=20
r:x delay=2ms bw=100
r:y delay=2ms
r:s delay=1ms
s:z delay=1ms bw=100 loss=0.5 jitter=1ms
"""

SCENARIO = """\
[topology]
file = "fan.conf"
ps_node = "a"
worker_nodes = ["x", "y", "z"]

[training]
mode = "sync"
key = "k"
"""


@pytest.fixture
def files(tmp_path: Path, monkeypatch) -> Path:
    """fan.conf and fan.toml in a folder of their own; the tests run elsewhere."""
    folder = tmp_path / "exp"
    folder.mkdir()
    (folder / "fan.conf").write_text(FAN)
    (folder / "fan.toml").write_text(SCENARIO)
    monkeypatch.chdir(tmp_path)
    return folder


def scenario(folder: Path, text: str = SCENARIO, **tables):
    doc = tomllib.loads(text)
    for key, value in tables.items():
        doc.setdefault(key, {}).update(value)
    return parse(doc, "fan", folder)


def test_a_scenario_reads_the_file_beside_it(files):
    sc = load(str(files / "fan.toml"))
    assert sc.topology == "minindn" and sc.ps_node == "a"
    assert sc.worker_nodes == ["x", "y", "z"] and sc.workers == 3
    assert sc.training.who.workers == ("w1", "w2", "w3")
    assert sc.raw["topology"]["file"] == str((files / "fan.conf").resolve())
    # apps use their node's forwarder over its socket; a lossy link asks for link reliability
    assert sc.links.app_faces is False and sc.links.reliability is True
    assert router_names(sc) == ["a", "r", "x", "y", "z", "s"]


def test_by_default_the_ps_takes_the_first_node_and_workers_the_others(files):
    sc = scenario(files, '[topology]\nfile = "fan.conf"\n[training]\nkey = "k"\n')
    assert sc.ps_node == "a" and sc.worker_nodes == ["r", "x", "y", "z"] and sc.workers == 4


def test_workers_go_round_the_worker_nodes(files):
    sc = scenario(files, topology={"worker_nodes": ["X", "y"], "workers": 5})
    assert sc.worker_nodes == ["x", "y"]                  # case as Mini-NDN: insensitive
    placed = {a.name: a.forwarder for a in topology.plan_local(sc).apps}
    assert placed == {"ps": "a", "w1": "x", "w2": "y", "w3": "x", "w4": "y", "w5": "x"}


def test_set_gives_the_file_relative_to_where_we_are(files, tmp_path):
    (tmp_path / "other.conf").write_text(FAN.replace("bw=20", "bw=30"))
    sc = load(str(files / "fan.toml"), ["topology.file=other.conf"])
    assert sc.network.links[0].bw == 30


@pytest.mark.parametrize("tables, message", [
    ({"topology": {"file": "nope.conf"}}, r"topology.file: .*nope.conf: no such file"),
    ({"topology": {"file": 3}}, r"topology.file: expected the path"),
    ({"topology": {"kind": "tree"}}, r"topology.kind: a topology file is kind = \"minindn\""),
    ({"topology": {"ps_node": "q"}}, r"topology.ps_node: no node 'q' in fan \(nodes: a, r"),
    ({"topology": {"ps_node": "s"}}, r"topology.ps_node: 's' is one of the file's \[switches\]"),
    ({"topology": {"worker_nodes": ["x", "x"]}}, r"topology.worker_nodes: a node named twice"),
    ({"topology": {"worker_nodes": "x"}}, r"topology.worker_nodes: expected a list"),
    ({"topology": {"worker_nodes": ["x", 3]}}, r"topology.worker_nodes\[1\]: expected a node"),
    ({"training": {"workers": ["w1", "r", "w3"]}}, r"training.workers: 'r' is also a node"),
    ({"training": {"ps": "a"}}, r"training.ps: 'a' is also a node"),
    ({"links": {"app_faces": True}}, r"links.app_faces: on a topology file"),
    ({"link": [{"from": "a", "to": "r", "loss": 0.1}]}, r"link\[0\].from"),
])
def test_bad_file_scenarios_name_the_key(files, tables, message):
    doc = tomllib.loads(SCENARIO)
    for key, value in tables.items():
        if isinstance(value, dict):
            doc.setdefault(key, {}).update(value)
        else:
            doc[key] = value
    with pytest.raises(ScenarioError, match=message):
        parse(doc, "fan", files)


def test_a_bad_file_is_refused_naming_its_line(files):
    (files / "fan.conf").write_text(FAN.replace("bw=100 loss", "bw=lots loss"))
    with pytest.raises(ScenarioError, match=r"topology.file: .*fan.conf:15: link s:z: "
                                            r"bw='lots' is not a number"):
        scenario(files)


def test_a_worker_node_cut_off_from_the_ps_is_refused(files):
    (files / "fan.conf").write_text(FAN.replace("[switches]", "q: _\n[switches]"))
    with pytest.raises(ScenarioError, match=r"topology.worker_nodes\[0\]: no path from 'q'"):
        scenario(files, topology={"worker_nodes": ["q"]})


def test_node_keys_need_a_file():
    with pytest.raises(ScenarioError, match="topology.ps_node: names a node of topology.file"):
        parse({"topology": {"kind": "tree", "ps_node": "a"}}, "t")
    with pytest.raises(ScenarioError, match="topology.file: expected the path"):
        parse({"topology": {"kind": "minindn"}}, "t")


def test_ps_less_training_is_not_built_on_a_file(files):
    with pytest.raises(ScenarioError, match="training.collective: PS-less training on a "
                                            "topology file"):
        scenario(files, training={"collective": "ring"})


def test_every_link_has_its_own_conditions_on_the_faces(files):
    sc = scenario(files, links={"delay_ms": 3.0, "rate_mbps": 50.0})
    plan = topology.plan_local(sc)
    faces = {(f, face.name): face for f, node in plan.forwarders.items() for face in node.faces}
    assert faces[("a", "r")].link == {"delay_ms": 5.0, "rate_mbps": 20.0}
    # r:y gives no bw: [links]' rate; s:z's loss in percent is a fraction on the face
    assert faces[("y", "r")].link == {"delay_ms": 2.0, "rate_mbps": 50.0}
    assert faces[("z", "s")].link == {"loss": 0.005, "delay_ms": 1.0, "jitter_ms": 1.0,
                                      "rate_mbps": 100.0}
    assert faces[("s", "z")].link == faces[("z", "s")].link
    assert all(face.reliability for face in faces.values())
    # a forwarder on every node and on the switch; the apps' faces are local: no conditions
    assert set(plan.forwarders) == {"a", "r", "x", "y", "z", "s"}
    assert all(not node.app_link for node in plan.forwarders.values())
    assert {a.name: a.forwarder for a in plan.apps} == {"ps": "a", "w1": "x", "w2": "y",
                                                         "w3": "z"}
    assert minindn.limited(sc)


def test_with_netns_every_node_is_a_host_and_the_rates_go_to_tbf(files):
    sc = scenario(files)
    sc.netns = True
    plan = topology.plan_hosts(sc)
    assert plan.host_links == [("a", "r"), ("r", "x"), ("r", "y"), ("r", "s"), ("s", "z")]
    assert all(node.host == name and not node.faces for name, node in plan.forwarders.items())

    class Veths:
        """The namespaces' veths as `join` reads them; tbf calls recorded."""
        def __init__(self) -> None:
            self.links = [Veth(a, b, f"{a}{b}a", f"{a}{b}b", f"10.0.{i}.1", f"10.0.{i}.2")
                          for i, (a, b) in enumerate(plan.host_links)]
            self.limits: list[tuple] = []

        def tbf(self, host, dev, rate_mbps, burst_bytes, queue_bytes) -> None:
            self.limits.append((host, dev, rate_mbps, burst_bytes, queue_bytes))

    veths = Veths()
    notes = minindn.join(plan, sc, veths)          # type: ignore[arg-type]
    assert notes == ["3 of 5 links limited by tbf at their rate"]
    assert ("a", "ara", 20.0, 16384, 1 << 20) in veths.limits
    assert ("r", "arb", 20.0, 16384, 1 << 20) in veths.limits and len(veths.limits) == 6
    faces = {(f, face.name): face for f, node in plan.forwarders.items() for face in node.faces}
    assert faces[("a", "r")].uri == "udp4://10.0.0.2:6363"
    assert faces[("a", "r")].link == {"delay_ms": 5.0}          # the rate is the kernel's
    assert faces[("z", "s")].link == {"loss": 0.005, "delay_ms": 1.0, "jitter_ms": 1.0}


SQUARE = """\
[nodes]
a: _
b: _
c: _
d: _
e: _
f: _
[links]
a:b delay=10ms
a:c delay=10ms
b:d delay=10ms
c:d delay=10ms
d:e delay=10ms
b:f delay=10ms
c:f delay=10ms
e:f delay=20ms
"""


def test_the_routes_are_the_paths_the_placement_plans(files):
    """Equal-cost paths everywhere: following each forwarder's route toward a worker from any
    node gives back, reversed, the LP's path of that worker's gradient to that node."""
    (files / "sq.conf").write_text(SQUARE)
    sc = scenario(files, topology={"file": "sq.conf", "worker_nodes": ["d", "e", "f"],
                                   "workers": 5})
    plan = topology.plan_local(sc)
    net = ina.network(sc, ina.Ina())
    routes = {f: dict(node.routes) for f, node in plan.forwarders.items()}
    at = {a.name: a.forwarder for a in plan.apps}
    for app in at:
        for s in plan.forwarders:
            hops, node = [], s
            while node != at[app]:
                nxt = routes[node][f"/{app}"]
                hops.append((nxt, node))
                node = nxt
            expected = net.path(app, s)[1:]              # (past the app's local link)
            assert hops[::-1] == expected, (app, s)
        # and every forwarder reaches every node by its name (an aggregator's hint)
    for f, table in routes.items():
        assert {p for p in table if p.lstrip("/") in plan.forwarders} == \
            {f"/{n}" for n in plan.forwarders if n != f}


def test_ina_places_on_the_files_nodes(files):
    sc = scenario(files, ina={"k": 1, "link_mbps": 1000})
    assert ina.edge(sc) == "a" and ina.candidates(sc) == ["r", "x", "y", "z"]
    placed = ina.place(sc, sc.ina)
    # r sums the three: one stream on the 20 Mbit/s link instead of three
    assert placed.gamma_by_k[0] == pytest.approx(20 / 3) and placed.gamma == pytest.approx(20)
    assert placed.edge == "a" and placed.aggregators == {"r": ["w1", "w2", "w3"]}
    sc.netns = True                  # the PS's node is its edge in namespaces too
    assert ina.edge(sc) == "a" and ina.place(sc, sc.ina).aggregators == placed.aggregators
    # a worker's own node may aggregate: x sums its own worker's gradient and the others'
    mine = scenario(files, ina={"k": 1, "placement": ["x"]})
    given = ina.place(mine, mine.ina)
    assert given.aggregators == {"x": ["w1", "w2", "w3"]} and given.gamma == pytest.approx(20)
    with pytest.raises(ScenarioError, match=r"ina.placement: 's' is not a forwarder that may "
                                            r"aggregate \(candidates: r, x, y, z\)"):
        scenario(files, ina={"placement": ["s"]})


def test_a_forwarder_of_the_file_may_be_killed(files):
    sc = scenario(files, faults={"kill": [{"forwarder": "r", "at_version": 5,
                                           "restart_after": 1.0}]})
    assert sc.kills[0].worker == "r" and sc.kills[0].role == "forwarder"
