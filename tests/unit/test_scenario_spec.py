"""Scenario files: every built-in one is valid; bad keys and values are named; --set works."""
from __future__ import annotations

import pytest

from ndnps.lab import spec
from ndnps.lab.tomltext import to_toml
from ndnps.lab.spec import ScenarioError, apply_overrides, load, parse


@pytest.mark.parametrize("name", spec.builtin_names())
def test_every_builtin_scenario_is_valid(name):
    sc = load(name)
    assert sc.name == name and sc.description
    assert len(sc.training.who.workers) == sc.workers


def test_the_required_scenarios_exist():
    assert set(spec.builtin_names()) >= {"sync-sgd", "async-sgd", "lossy", "tree",
                                                   "straggler", "unicast"}


def test_default_is_the_embedded_sync_sgd():
    sc = load(None)
    assert (sc.name, sc.topology, sc.workers, sc.training.update.mode) == \
        ("sync-sgd", "star", 4, "sync")


def test_overrides_reach_any_field():
    sc = load("sync-sgd", ["training.epochs=3", "links.loss=0.05", "topology.workers=8",
                           "workers.slowdown={ w2 = 2.0 }", "training.hidden=[32, 16]"])
    assert sc.training.sgd.epochs == 3 and sc.links.loss == 0.05 and sc.workers == 8
    assert sc.training.who.workers == tuple(f"w{i}" for i in range(1, 9))
    assert sc.slowdown == {"w2": 2.0} and sc.training.model.hidden == (32, 16)
    assert sc.links.reliability                 # lossy links have it unless told otherwise
    assert not load("sync-sgd").links.reliability
    assert not load("lossy", ["links.reliability=false"]).links.reliability
    sc = load("lossy", ["links.reliability=true"])
    assert sc.links.reliability and "reliability" not in sc.links.as_table()


@pytest.mark.parametrize("doc, key", [
    ({"topolgy": {}}, "topolgy"),
    ({"topology": {"kind": "ring"}}, "topology.kind"),
    ({"topology": {"workers": 0}}, "topology.workers"),
    ({"topology": {"workers": "4"}}, "topology.workers"),
    ({"links": {"loss": 1.5}}, "links.loss"),
    ({"links": {"lossy": 0.1}}, "links.lossy"),
    ({"forwarder": {"pit_entries": -1}}, "forwarder.pit_entries"),
    ({"forwarder": {"nope": 1}}, "forwarder.nope"),
    ({"workers": {"slowdown": {"w9": 2.0}}}, "workers.slowdown.w9"),
    ({"workers": {"slowdown": {"w1": 0.5}}}, "workers.slowdown.w1"),
    ({"run": {"timeout": 0}}, "run.timeout"),
    ({"netns": {"enabled": "yes"}}, "netns.enabled"),
    ({"training": {"lr": -1}}, "training.lr"),
    ({"training": {"mode": "lockstep"}}, "training.mode"),
    ({"training": {"epoch": 3}}, "training.epoch"),
    ({"link": [{"from": "fwd", "to": "w1"}]}, "link[0].from"),
    ({"topology": {"kind": "tree"}, "link": [{"from": "leaf1", "to": "leaf2"}]}, "link[0].from"),
    ({"topology": {"kind": "tree"}, "link": [{"from": "root", "to": "leaf1", "loss": 2}]},
     "link[0].loss"),
    ({"links": {"reliability": "yes"}}, "links.reliability"),
    ({"topology": {"kind": "tree"},
      "link": [{"from": "root", "to": "leaf1", "reliability": True}]}, "link[0].reliability"),
    ({"links": {"app_faces": 0}}, "links.app_faces"),
    ({"topology": {"kind": "tree"},
      "link": [{"from": "root", "to": "leaf1", "app_faces": False}]}, "link[0].app_faces"),
])
def test_bad_values_name_the_key(doc, key):
    with pytest.raises(ScenarioError) as e:
        parse(doc, "bad")
    assert str(e.value).startswith(key)


@pytest.mark.parametrize("item, key", [
    ("links.loss=nan", "links.loss"), ("links.delay_ms=inf", "links.delay_ms"),
    ("run.timeout=inf", "run.timeout"), ("forwarder.ppit_lifetime=-inf", "forwarder.ppit_lifetime"),
    ("workers.slowdown.w1=nan", "workers.slowdown.w1"), ("training.lr=nan", "training.lr"),
    ("training.momentum=nan", "training.momentum"), ("training.rejoin_timeout=inf",
                                                     "training.rejoin_timeout"),
])
def test_nan_and_inf_are_refused_naming_the_key(item, key):
    # nan and inf pass every `<` and `>` bound: refused where any float is parsed
    with pytest.raises(ScenarioError) as e:
        load("sync-sgd", [item])
    assert str(e.value).startswith(f"{key}: expected a finite number, got ")


def test_bad_override_syntax():
    with pytest.raises(ScenarioError, match="KEY=VALUE"):
        apply_overrides({}, ["training.epochs"])
    with pytest.raises(ScenarioError, match="not a table"):
        apply_overrides({"description": "x"}, ["description.y=1"])


def test_several_bad_overrides_are_named_in_one_message_each_by_its_key(capsys):
    with pytest.raises(ScenarioError) as e:
        apply_overrides({"description": "x"}, ["training.epochs", "a..b=1", "description.y=1",
                                               "training.lr=0.1"])
    assert str(e.value).split("; ") == [
        "--set 'training.epochs': expected KEY=VALUE, e.g. training.epochs=3",
        "--set 'a..b=1': bad key 'a..b'", "description.y: description is not a table"]
    sets = ["training.epochs=-1", "links.loss=2", "training.lr=0.05", "run.timeout=nan",
            "training.epochz=3", "oops"]
    with pytest.raises(ScenarioError) as e:
        load("sync-sgd", sets)
    parts = str(e.value).split("; ")
    assert [p.split(":")[0] for p in parts] == [
        "training.epochs", "links.loss", "run.timeout", "training.epochz", "--set 'oops'"]
    from ndnps.lab.scenario import main
    assert main(["sync-sgd", *[a for s in sets for a in ("--set", s)]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("scenario error: training.epochs: ")
    assert all(f"{key}: " in err for key in ("links.loss", "run.timeout", "training.epochz"))


def test_overrides_fine_alone_but_not_together_give_the_error_of_the_whole():
    """Each alone is fine, so none is named: the scenario's own first error is."""
    with pytest.raises(ScenarioError) as e:
        load("sync-sgd", ["topology.kind=\"fat-tree\"", "topology.k=3"])
    assert str(e.value).startswith("topology.k: ")


def test_unknown_scenario_and_unreadable_file(tmp_path):
    with pytest.raises(ScenarioError, match="unknown scenario"):
        load("no-such-scenario")
    with pytest.raises(ScenarioError, match="cannot read"):
        load(str(tmp_path / "missing.toml"))
    broken = tmp_path / "broken.toml"
    broken.write_text("[topology\nkind = 1")
    with pytest.raises(ScenarioError, match="broken"):
        load(str(broken))


def test_scenario_as_run_round_trips_through_toml(tmp_path):
    sc = load("straggler", ["training.epochs=2"])
    doc = dict(sc.raw)
    doc["training"] = sc.training.as_table()
    path = tmp_path / "as-run.toml"
    path.write_text(to_toml(doc))
    again = load(str(path))
    assert again.training == sc.training and again.slowdown == sc.slowdown


def test_per_link_direction_overrides():
    from ndnps.lab.topology import apply_link_overrides, plan_local
    sc = parse({"topology": {"kind": "tree"}, "links": {"delay_ms": 1.0},
                "link": [{"from": "root", "to": "leaf2", "loss": 0.2}]}, "t")
    plan = plan_local(sc)
    apply_link_overrides(plan, sc)
    root = {f.name: f.link for f in plan.forwarders["root"].faces}
    back = {f.name: f.link for f in plan.forwarders["leaf2"].faces}
    assert root == {"leaf1": {"delay_ms": 1.0}, "leaf2": {"loss": 0.2}}
    assert back == {"root": {"delay_ms": 1.0}}          # the other direction keeps [links]


def test_link_reliability_goes_on_both_ends_of_every_forwarder_link(tmp_path):
    from ndnps.lab.topology import plan_local
    sc = parse({"topology": {"kind": "tree"}, "links": {"loss": 0.05, "reliability": True}}, "t")
    plan = plan_local(sc)
    faces = [f for node in plan.forwarders.values() for f in node.faces]
    assert len(faces) == 4 and all(f.reliability for f in faces)
    conf = plan.forwarders["leaf1"].config(tmp_path, {}, 1.0)
    from ndnps.forwarder.config import parse_config, read_toml
    (tmp_path / "leaf1.toml").write_text(conf)
    [root] = parse_config(read_toml(tmp_path / "leaf1.toml")).faces
    assert (root.name, root.reliability, root.link.loss) == ("root", True, 0.05)
    plain = plan_local(parse({"topology": {"kind": "tree"}}, "t"))
    assert not any(f.reliability for n in plain.forwarders.values() for f in n.faces)
    assert "reliability =" not in plain.forwarders["root"].config(tmp_path, {}, 1.0)


def test_app_faces_false_emulates_the_forwarder_links_alone(tmp_path):
    """Loss and link reliability between forwarders only, as NFD deployments have them: the
    apps' faces carry no conditions and the apps do not ask for link reliability."""
    from ndnps.lab.runner import Runner
    from ndnps.lab.topology import plan_local
    doc = {"topology": {"kind": "tree", "leaves": 1},
           "links": {"loss": 0.05, "reliability": True, "app_faces": False}}
    sc = parse(doc, "t")
    plan = plan_local(sc)
    assert all(node.app_link == {} for node in plan.forwarders.values())
    faces = [f for node in plan.forwarders.values() for f in node.faces]
    assert len(faces) == 2 and all(f.reliability and f.link == {"loss": 0.05} for f in faces)
    assert Runner(sc, tmp_path).link_flags() == ["--link-repair"]
    on_apps = parse({**doc, "links": {"loss": 0.05, "reliability": True}}, "t")
    assert Runner(on_apps, tmp_path).link_flags() == ["--lp-reliability"]
    assert all(n.app_link == {"loss": 0.05} for n in plan_local(on_apps).forwarders.values())


def test_app_faces_false_on_a_local_star_is_refused():
    star = parse({"links": {"loss": 0.05, "app_faces": False}}, "t")
    with pytest.raises(ScenarioError, match="^links.app_faces"):
        spec.check_local(star)
    spec.check_local(parse({"links": {"app_faces": False}}, "t"))    # nothing to lose
    spec.check_local(parse({"topology": {"kind": "tree"},
                                     "links": {"loss": 0.05, "app_faces": False}}, "t"))


def test_every_forwarder_gets_the_trainings_retransmission_suppression(tmp_path):
    """The forwarders suppress retransmissions for the interval the apps' fetchers wait."""
    from ndnps.forwarder.config import parse_config, read_toml
    from ndnps.forwarder.strategy import strategy_by_name
    from ndnps.lab.topology import forwarder_strategy, plan_local
    sc = parse({"topology": {"kind": "tree"},
                "training": {"retx_suppression_ms": 3, "retx_suppression_max_ms": 5}}, "t")
    for name, node in plan_local(sc).forwarders.items():
        (tmp_path / f"{name}.toml").write_text(
            node.config(tmp_path, {"pit_entries": 100}, 1.0, forwarder_strategy(sc)))
        strategies = parse_config(read_toml(tmp_path / f"{name}.toml")).strategies
        suppression = strategy_by_name(strategies["/"]).suppression
        assert (suppression.initial, suppression.max) == (0.003, 0.005)
    nfd = forwarder_strategy(parse({"training": {"retx_suppression_ms": 10,
                                                 "retx_suppression_max_ms": 250}}, "t"))
    assert "retx-suppression" not in nfd                            # NFD's defaults
    with pytest.raises(ScenarioError, match="training.retx_suppression_ms"):
        parse({"training": {"retx_suppression_ms": 0}}, "t")
    with pytest.raises(ScenarioError, match="training.retx_suppression_ms: must be <="):
        parse({"training": {"retx_suppression_ms": 10}}, "t")       # above the maximum


def test_the_runner_refuses_app_faces_false_on_a_local_star_before_anything_starts(tmp_path,
                                                                                   capsys):
    from ndnps.lab.scenario import main
    out = tmp_path / "run"
    assert main(["sync-sgd", "--set", "links.loss=0.05", "--set", "links.app_faces=false",
                 "--out", str(out)]) == 2
    assert "links.app_faces" in capsys.readouterr().err and not out.exists()


def test_list_aligns_every_description(capsys):
    from ndnps.lab.scenario import list_scenarios
    assert list_scenarios() == 0
    lines = capsys.readouterr().out.splitlines()
    names = spec.builtin_names()
    assert len(lines) == len(names)
    # each description starts in the same column, after the longest name and two spaces
    column = max(map(len, names)) + 2
    assert all(line[:column].rstrip() == name and line[column] != " "
               for line, name in zip(lines, names))


def test_a_bad_scenario_and_a_bad_out_are_one_message(tmp_path, capsys):
    from ndnps.lab.scenario import main
    taken = tmp_path / "taken"
    taken.write_text("x")
    assert main(["--set", "links.loss=2", "--out", str(taken)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("scenario error: links.loss: ")
    assert f"; --out {taken}: exists and is not an empty directory" in err
    fresh = tmp_path / "new" / "run"
    assert main(["--set", "links.loss=2", "--out", str(fresh)]) == 2
    assert "--out" not in capsys.readouterr().err and not fresh.parent.exists()
