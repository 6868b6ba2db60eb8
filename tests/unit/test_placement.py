"""The placement control plane: generated topologies, the LP against hand-computed γ, the
greedy search against exhaustive search, and the command line (Mini-NDN files:
test_placement_minindn.py)."""
from __future__ import annotations

import json

import pytest

from ndnps.placement.__main__ import main
from ndnps.placement.greedy import baselines, exhaustive, greedy
from ndnps.placement.lp import Problem, solve
from ndnps.placement.network import (Link, Network, TopologyError, fat_tree, leaf_spine,
                                     parse_topology)


def small() -> Network:
    """ps - e - s - {w1, w2}, and w3 on e: every link 100 Mbit/s."""
    return Network(["ps", "w1", "w2", "w3"], ["e", "s"],
                   [Link("ps", "e"), Link("e", "s"), Link("s", "w1"), Link("s", "w2"),
                    Link("e", "w3")])


def test_fat_tree_and_leaf_spine_have_the_textbook_shape():
    ft = fat_tree(4)
    assert (len(ft.switches), len(ft.hosts), len(ft.links)) == (20, 16, 48)
    assert ft.edge_of("h1") == "e1-1" and ft.edge_of("h16") == "e4-2"
    assert len(ft.path("h1", "h16")) == 6 and len(ft.path("h1", "h2")) == 2
    ls = leaf_spine(2, 3, 4)
    assert (len(ls.switches), len(ls.hosts), len(ls.links)) == (5, 12, 18)
    assert [a for a, _ in ls.path("h1", "h12")] == ["h1", "l1", ls.path("h1", "h12")[1][1], "l3"]
    # equal-cost paths spread by the (source, destination) pair, the same pair always alike
    cores = {ft.path(f"h{i}", "h1")[2][1] for i in range(5, 17)}
    assert len(cores) > 1 and ft.path("h9", "h1") == ft.path("h9", "h1")


@pytest.mark.parametrize("spec, message", [
    ("fat-tree:3", "k must be even"), ("fat-tree:x", "expected fat-tree:K"),
    ("leaf-spine:1,2", "expected fat-tree:K"), ("leaf-spine:0,2,2", "every count must be"),
    ("no-such-file.conf", "neither fat-tree"),
])
def test_bad_topology_specs_say_why(spec, message):
    with pytest.raises(TopologyError, match=message):
        parse_topology(spec)


def test_the_lp_gives_the_hand_computed_gamma():
    problem = Problem(small(), "ps", ["w1", "w2", "w3"], capacity=400)
    assert problem.edge == "e" and problem.candidates() == ["s"]
    # no aggregator: w1's and w2's gradients share s->e unaggregated, 2γ <= 100
    none = solve(problem, [])
    assert none.gamma == pytest.approx(50.0) and set(none.plan.values()) == {"edge"}
    # s aggregates them: one stream on s->e, γ = 100 (the links' rate)
    with_s = solve(problem, ["s"])
    assert with_s.gamma == pytest.approx(100.0)
    assert with_s.plan == {"w1": "s", "w2": "s", "w3": "edge"}
    # s can take 150 Mbit/s of input: 75 from each, the rest unaggregated over s->e:
    # 75 + 2(γ - 75) <= 100, γ = 87.5
    limited = Problem(small(), "ps", ["w1", "w2", "w3"], capacity=150)
    assert solve(limited, ["s"]).gamma == pytest.approx(87.5)
    # the edge's own capacity, when given, bounds what it takes in
    edge_bound = Problem(small(), "ps", ["w1", "w2", "w3"], capacity=400, edge_capacity=120)
    assert solve(edge_bound, []).gamma == pytest.approx(50.0)
    # ... what it cannot take reaches the PS unsummed (z), unless every gradient must be
    # summed (a scenario's data plane): then 3γ <= 120
    summed = Problem(small(), "ps", ["w1", "w2", "w3"], capacity=400, edge_capacity=120,
                     unsummed=False)
    assert solve(summed, []).gamma == pytest.approx(40.0)
    assert all(r.keys() <= {"edge", "s"} for r in solve(summed, ["s"]).rates.values())


def test_the_ps_its_edge_and_the_workers_are_not_candidates():
    problem = Problem(small(), "ps", ["w1", "w2", "w3"])
    with pytest.raises(TopologyError, match="not a candidate"):
        solve(problem, ["w1"])
    with pytest.raises(TopologyError, match="no such node"):
        Problem(small(), "ps", ["w9"])
    with pytest.raises(TopologyError, match="cannot also be a worker"):
        Problem(small(), "ps", ["ps", "w1"])


def test_greedy_grows_gamma_and_stays_near_exhaustive_search():
    net = fat_tree(4)
    problem = Problem(net, "h1", net.hosts[1:])
    placement = greedy(problem, 3)
    gammas = [placement.gamma_by_k[k] for k in range(4)]
    assert gammas == sorted(gammas) and gammas[0] < gammas[3]
    assert len(placement.best.aggregators) == 3
    for k in (1, 2):
        best = exhaustive(problem, k)
        assert best is not None
        assert placement.gamma_by_k[k] >= 0.9 * best.gamma - 1e-9
        assert placement.gamma_by_k[k] <= best.gamma + 1e-9
    assert exhaustive(problem, 6) is None                 # C(19, 6) > 5000 sets
    b = baselines(problem, 1)
    assert b["edge_only"] == pytest.approx(gammas[0]) and b["all"] >= gammas[3]
    assert b["random"] <= b["exhaustive"] + 1e-9


def test_the_command_line_prints_json_with_the_documented_keys(capsys):
    assert main(["--topology", "leaf-spine:2,2,2", "--k", "1", "--baselines", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"placement", "gamma", "gamma_by_k", "plan", "baselines"} <= set(out)
    assert set(out["baselines"]) == {"random", "edge_only", "all", "exhaustive"}
    assert set(out["gamma_by_k"]) == {"0", "1"} and len(out["placement"]) == 1
    assert set(out["plan"]) == {"h2", "h3", "h4"}
    assert main(["--topology", "fat-tree:3", "--k", "1"]) == 2
    assert "k must be even" in capsys.readouterr().err
    assert main(["--topology", "fat-tree:4", "--k", "1", "--ps", "h99"]) == 2


@pytest.mark.parametrize("argv, flag", [
    (["--capacity", "nan"], "--capacity"), (["--capacity", "inf"], "--capacity"),
    (["--k", "-1"], "--k"), (["--ps", "h99"], "--ps"), (["--workers", "h2,zz"], "--workers"),
    (["--ps", "h1", "--workers", "h1,h2"], "--workers"),
])
def test_every_bad_flag_is_one_line_naming_it(argv, flag, capsys):
    assert main(["--topology", "leaf-spine:2,2,2", "--k", "1", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"placement: {flag}: ") and err.count("\n") == 1


def test_several_bad_flags_are_one_message(capsys):
    assert main(["--topology", "fat-tree:3", "--k", "-1", "--capacity", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert all(f"{flag}: " in err for flag in ("--topology", "--k", "--capacity"))


def test_a_reader_gone_is_no_traceback():
    """`python -m ndnps.placement ... | head -1`: the pipe closed before the output is written
    (head gone) stops it quietly, as Unix tools do, exit 1 — no BrokenPipeError traceback."""
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-m", "ndnps.placement", "--topology",
                             "leaf-spine:2,2,2", "--k", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()                     # the reader gone before anything is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert err == ""


def test_k_beyond_the_candidates_says_what_it_placed(capsys):
    # leaf-spine:2,2,2 with the PS on h1: l2, s1, s2 may aggregate (l1 is the PS's edge)
    assert main(["--topology", "leaf-spine:2,2,2", "--k", "100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["k"], out["candidates"], out["placed"], len(out["placement"])) == (100, 3, 3, 3)
    assert main(["--topology", "leaf-spine:2,2,2", "--k", "100"]) == 0
    assert "placement (k = 100 asked, 3 candidate forwarders: placing all 3): " in \
        capsys.readouterr().out
    assert main(["--topology", "leaf-spine:2,2,2", "--k", "2"]) == 0
    assert "placement (k = 2): " in capsys.readouterr().out
