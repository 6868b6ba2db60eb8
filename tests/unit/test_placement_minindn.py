"""Mini-NDN topology files read as Mini-NDN means them — every node an NDN forwarder, where apps
may run and which may aggregate — by the parser, the network's routes (NLSR's least delay, one
next hop per node as a FIB) and the placement command line. The files are written here the way
Mini-NDN's own are (comments, `_` options, radius=/angle=, network=/router=, an empty
[switches], delays in ms)."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from ndnps.placement.__main__ import main
from ndnps.placement.lp import Problem, solve
from ndnps.placement.network import (DEFAULT_BW, NLSR_COST, TopologyError, parse_topology,
                                     read_minindn)

ROOT = Path(__file__).resolve().parents[2]

# a ring a-b-d-c-a, where the short way from a to d (2 hops through b) is the slow one
RING = """\
# A small ring, written as Mini-NDN writes its topologies
; configparser's other comment
[nodes]
a: _ radius=0.5 angle=2.64159265359 network=/world router=/a.Router/
B: _ radius=0.6 angle=3.64159265359
c: _ nfd-log-level=DEBUG
d:
[switches]

[links]
a:B delay=10ms bw=50
B:d delay=30ms loss=1 max_queue_size=100
a:c delay=5ms jitter=1ms
c:d delay=0.5s bw=1000
d:e delay=1ms"""

SQUARE = """\
[nodes]
a: _
b: _
c: _
d: _
[switches]
[links]
a:b delay=10ms
a:c delay=10ms
b:d delay=10ms
c:d delay=10ms
"""


def write(tmp_path: Path, text: str, name: str = "topo.conf") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_every_node_of_a_file_is_a_forwarder_and_its_links_keep_their_options(tmp_path):
    net = read_minindn(write(tmp_path, RING.replace("d:e delay=1ms", "")))
    assert net.switches == ["a", "B", "c", "d"] and net.hosts == [] and net.relays == []
    assert net.fib and net.name == "topo"
    ab, bd, ac, cd = net.links
    assert (ab.bw, ab.delay_ms, ab.loss, ab.cost) == (50, 10, None, 10)
    assert (bd.bw, bd.loss, bd.delay_ms) == (None, 1, 30)           # max_queue_size: ignored
    assert ac.jitter_ms == 1 and cd.delay_ms == 500 and cd.bw == 1000
    assert net.capacity("B", "d") == DEFAULT_BW and net.capacity("c", "d") == 1000
    # an app on a node uses the node's own forwarder
    assert net.edge_of("a") == "a"
    # names as Mini-NDN reads them: case does not matter
    assert net.node("b") == "B" and net.node("A") == "a"
    with pytest.raises(TopologyError, match="no node 'x'"):
        net.node("x")


def test_routes_follow_the_least_delay_as_nlsr_and_data_returns_the_interests_way(tmp_path):
    net = read_minindn(write(tmp_path, RING.replace("d:e delay=1ms", "")
                             .replace("delay=0.5s", "delay=2ms")))
    # a -> d: through c (5 + 2 ms), not the slow b side (10 + 30 ms)
    assert net.path("a", "d") == [("a", "c"), ("c", "d")]
    assert net.next_hop("B", "c") == "a"                 # 10 + 5 against 30 + 2
    # a link without delay= costs NLSR's default link cost
    no_delay = read_minindn(write(tmp_path, "[nodes]\na:\nb:\n[links]\na:b bw=10\n", "n.conf"))
    assert no_delay.links[0].cost == NLSR_COST and no_delay.links[0].delay_ms is None
    # equal costs: each node picks its own next hop (a FIB), and a gradient from src to dst
    # goes back along the path dst's Interests take toward src
    sq = read_minindn(write(tmp_path, SQUARE, "sq.conf"))
    for src, dst in [("a", "d"), ("d", "a"), ("b", "c"), ("c", "b")]:
        hops, node = [], dst
        while node != src:
            nxt = sq.next_hop(node, src)
            hops.append((nxt, node))
            node = nxt
        assert sq.path(src, dst) == hops[::-1]
    assert {sq.next_hop(n, d) for n in "abcd" for d in "abcd" if n != d} <= set("abcd")


def test_a_files_switches_forward_only(tmp_path):
    """[switches] are Mininet's layer-2 switches in Mini-NDN: here they forward, run no app
    and never aggregate; the nodes behind them do."""
    text = """\
[nodes]
ps: _
w1: _
w2: _
[switches]
s1: _
s2:
[links]
ps:s1 delay=10ms bw=1000
s1:s2 delay=5ms bw=40 loss=1
s2:w1 delay=1ms bw=100
s2:w2 delay=1ms bw=100
"""
    net = read_minindn(write(tmp_path, text))
    assert net.switches == ["ps", "w1", "w2"] and net.relays == ["s1", "s2"]
    problem = Problem(net, "ps", ["w1", "w2"])
    assert problem.edge == "ps" and problem.candidates() == ["w1", "w2"]
    # both gradients share the 40 Mbit/s link unsummed; w1 summing w2's sends one stream
    assert solve(problem, []).gamma == pytest.approx(20.0)
    assert solve(problem, ["w1"]).gamma == pytest.approx(40.0)
    with pytest.raises(TopologyError, match="not a candidate"):
        solve(problem, ["s2"])
    with pytest.raises(TopologyError, match="forwards only"):
        Problem(net, "s1", ["w1"])


@pytest.mark.parametrize("text, message", [
    (RING, r"topo.conf:15: link d:e: no node 'e'"),
    (RING.replace("bw=50", "bw=fast"), r":11: link a:B: bw='fast' is not a number"),
    (RING.replace("bw=50", "bw=0"), r":11: link a:B: bw must be > 0"),
    (RING.replace("delay=10ms bw", "delay=10 bw"), r":11: link a:B: delay='10' is not a number "
                                                   r"\(units: ms, s, us\)"),
    (RING.replace("loss=1 ", "loss=150 "), r":12: link B:d: loss is a percentage"),
    (RING.replace("loss=1 ", "colour=1 "), r":12: link B:d: unknown option 'colour'"),
    (RING.replace("loss=1 ", "loss "), r":12: link B:d: 'loss' is not key=value"),
    (RING.replace("loss=1 ", "loss=1 loss=2 "), r":12: link B:d: loss given twice"),
    (RING.replace("[switches]", "[stations]"), r":8: \[stations\]: unknown section"),
    (RING.replace("[switches]", "[nodes]"), r":8: \[nodes\]: given twice"),
    (RING.replace("c: _ nfd", "b: _ nfd"), r":6: node 'b': named twice"),
    (RING.replace("a: _ radius=0.5", "a: _ radius"), r":4: node a: 'radius' is not key=value"),
    (RING.replace("d:e delay=1ms", "d:b delay=1ms"), r":15: link d:b: given twice \(line 12\)"),
    (RING.replace("d:e delay=1ms", "d:D"), r":15: link d:D: a node linked to itself"),
    (RING.replace("d:e delay=1ms", "d-e delay=1ms"), r":15: link d-e: expected a:b"),
    (RING.replace("d:e delay=1ms", "a:b:c"), r":15: link a:b:c: expected a:b"),
    (RING.replace("d:\n", "d/x:\n"), r":7: 'd/x' is not a node name"),
    ("a: _\n[nodes]\n[links]\n", r"topo.conf:1: a line before any \[section\]"),
    ("[nodes]\na: _\n", r"needs \[nodes\] and \[links\]"),
    ("[nodes]\n[links]\n", r"\[nodes\] names no node"),
])
def test_a_bad_file_names_its_line_and_key(tmp_path, text, message):
    with pytest.raises(TopologyError, match=message):
        read_minindn(write(tmp_path, text))


def test_the_command_line_places_on_a_files_nodes(tmp_path, capsys):
    path = write(tmp_path, RING.replace("d:e delay=1ms", ""))
    assert main(["--topology", str(path), "--k", "2", "--ps", "A", "--workers", "b,c,d",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ps"] == "a" and out["edge"] == "a" and out["workers"] == ["B", "c", "d"]
    # any node but the PS's may aggregate, the workers' own too
    assert set(out["placement"]) <= {"B", "c", "d"} and len(out["placement"]) == 2
    assert out["gamma_by_k"]["2"] >= out["gamma_by_k"]["0"] > 0
    # by default the PS on the first node, workers on the others
    assert main(["--topology", str(path), "--k", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ps"] == "a" and out["workers"] == ["B", "c", "d"]
    assert main(["--topology", str(path), "--k", "1", "--ps", "zz"]) == 2
    assert "no node 'zz'" in capsys.readouterr().err
    bad = write(tmp_path, RING, "bad.conf")
    assert main(["--topology", str(bad), "--k", "1"]) == 2
    assert "bad.conf:15: link d:e: no node 'e'" in capsys.readouterr().err


def test_the_docs_example_runs_as_written(tmp_path, monkeypatch, capsys):
    """docs/placement.md's Mini-NDN command, on a four-node file of that name."""
    docs = (ROOT / "docs" / "placement.md").read_text()
    line = next(m.group(0) for m in re.finditer(r"python -m ndnps\.placement [^\n]*\.conf[^\n]*",
                                                docs))
    argv = shlex.split(line)[3:]
    name = argv[argv.index("--topology") + 1]
    write(tmp_path, RING.replace("d:e delay=1ms", ""), name)
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0, capsys.readouterr().err
    assert "placement (k = 2)" in capsys.readouterr().out


def test_parse_topology_reads_a_file_by_its_path(tmp_path):
    net = parse_topology(str(write(tmp_path, SQUARE)))
    assert net.switches == ["a", "b", "c", "d"] and net.fib
