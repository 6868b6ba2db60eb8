"""The bottleneck scenario's lab parts, without namespaces: its scenario keys (every bad one
named), the two-host plan, the tbf counters and wire limits in summary.json, and the TCP PS
baseline's command lines (checked against bench.tcp_ps's own parser)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import tcp_ps
from ndnps.lab import baseline, netns
from ndnps.lab.bottleneck import bottleneck_rows, bottleneck_summary
from ndnps.lab.runner import Runner
from ndnps.lab.scenario import main
from ndnps.lab.spec import ScenarioError, load, parse
from ndnps.lab.topology import assign_addresses, plan_bottleneck, plan_hosts
from ndnps.ml.train import steps_per_epoch

BOTTLENECK = {"topology": {"kind": "bottleneck", "workers": 3}}


def test_the_shipped_scenario_is_the_congestion_testbed():
    sc = load("bottleneck")
    assert (sc.topology, sc.netns, sc.workers, sc.system) == ("bottleneck", True, 8, "ndnps")
    assert (sc.bottleneck.rate_mbps, sc.bottleneck.mtu) == (100.0, 1500)
    t = sc.training
    assert (t.update.mode, t.push.push_mode, t.model.model, t.model.dataset) == \
        ("sync", "persistent", "mlp", "synthetic")
    sizes = [t.model.n_features, *t.model.hidden, 10]
    assert sum(a * b + b for a, b in zip(sizes, sizes[1:])) == 986_634      # the "1M" model
    assert t.sgd.max_versions == 60
    assert t.sgd.epochs * steps_per_epoch(16_000, 8, t.sgd.batch) >= 60
    assert load("bottleneck", ['training.push_mode="unicast"']).training.push.push_mode == "unicast"
    assert load("bottleneck", ['run.system="tcp"']).system == "tcp"


@pytest.mark.parametrize("doc, key", [
    ({"bottleneck": {"rate_mbps": 0}}, "bottleneck.rate_mbps"),
    ({"bottleneck": {"rate_mbps": "fast"}}, "bottleneck.rate_mbps"),
    ({"bottleneck": {"queue_bytes": 1000}}, "bottleneck.queue_bytes"),     # < one frame
    ({"bottleneck": {"queue_bytes": 1e6}}, "bottleneck.queue_bytes"),      # not an integer
    ({"bottleneck": {"burst_bytes": 1513}}, "bottleneck.burst_bytes"),
    ({"bottleneck": {"mtu": 9000, "burst_bytes": 9000}}, "bottleneck.burst_bytes"),
    ({"bottleneck": {"mtu": 100}}, "bottleneck.mtu"),
    ({"links": {"mtu": 100}}, "links.mtu"),
    ({"bottleneck": {"rate": 10}}, "bottleneck.rate"),
    ({"bottleneck": []}, "bottleneck"),
    ({"netns": {"enabled": False}}, "netns.enabled"),
    ({"run": {"system": "mpi"}}, "run.system"),
    ({"run": {"system": "tcp"}, "training": {"mode": "async"}}, "training.mode"),
    ({"run": {"system": "tcp"}, "training": {"dataset": "digits"}}, "training.dataset"),
    ({"run": {"system": "tcp"}, "training": {"dataset": "synthetic", "model": "softmax"}},
     "training.model"),
    ({"run": {"system": "tcp"}, "links": {"delay_ms": 5}}, "links.delay_ms"),
    ({"run": {"system": "tcp"}, "faults": {"kill": [{"worker": "w1", "at_version": 3}]}},
     "faults"),
    ({"faults": {"kill": [{"forwarder": "fwd", "at_version": 3, "restart_after": 1}]}},
     "faults.kill[0].forwarder"),
])
def test_bad_bottleneck_values_name_the_key(doc, key):
    with pytest.raises(ScenarioError) as e:
        parse({**BOTTLENECK, "training": {"dataset": "synthetic"}, **doc}, "bad")
    assert str(e.value).startswith(key + ":")


@pytest.mark.parametrize("doc, key", [
    ({"bottleneck": {"rate_mbps": 10.0}}, "bottleneck"),        # a star has no bottleneck
    ({"run": {"system": "tcp"}}, "run.system"),                   # nor a TCP baseline
    ({"topology": {"kind": "ring"}}, "topology.kind"),
])
def test_bottleneck_keys_elsewhere_are_refused(doc, key):
    with pytest.raises(ScenarioError) as e:
        parse({"training": {"dataset": "synthetic"}, **doc}, "bad")
    assert str(e.value).startswith(key + ":")


def test_the_bottleneck_runs_in_namespaces_and_its_forwarders_can_be_killed():
    sc = parse({**BOTTLENECK, "bottleneck": {"rate_mbps": 1000.0, "mtu": 9000,
                                              "burst_bytes": 65536},
                "faults": {"kill": [{"forwarder": "workers-host", "at_version": 5,
                                     "restart_after": 1.0}]}}, "b")
    assert sc.netns and sc.bottleneck.rate_bytes_per_s == 125e6
    assert sc.kills[0].worker == "workers-host" and sc.kills[0].role == "forwarder"


def test_two_hosts_one_link_one_udp_face_each_way(tmp_path):
    from ndnps.forwarder.config import parse_config, read_toml
    sc = parse({**BOTTLENECK, "links": {"reliability": True}}, "b")
    plan = plan_hosts(sc)
    assert plan.forwarders.keys() == plan_bottleneck(sc).forwarders.keys()
    assert sorted(plan.forwarders) == ["ps-host", "workers-host"]
    assert plan.host_links == [("ps-host", "workers-host")]
    assert {(a.name, a.role, a.forwarder) for a in plan.apps} == {
        ("ps", "ps", "ps-host"), *((f"w{i}", "worker", "workers-host") for i in (1, 2, 3))}
    assign_addresses(plan, [("10.0.0.1", "10.0.0.2")], {}, sc.links.reliability)
    confs = {}
    for name, node in plan.forwarders.items():
        (tmp_path / f"{name}.toml").write_text(node.config(tmp_path, {}, 1.0))
        confs[name] = parse_config(read_toml(tmp_path / f"{name}.toml"))
    [to_workers] = confs["ps-host"].faces
    [to_ps] = confs["workers-host"].faces
    assert (to_workers.name, to_workers.uri) == ("workers-host", "udp4://10.0.0.2:6363")
    assert (to_ps.name, to_ps.uri) == ("ps-host", "udp4://10.0.0.1:6363")
    assert to_workers.reliability and to_ps.reliability
    # datagrams of a 1500-octet link: 1472 octets (IPv4 and UDP headers), longer as fragments
    assert {c.udp_faces.mtu for c in confs.values()} == {1472}
    assert plan.forwarders["ps-host"].routes == [(f"/w{i}", "workers-host") for i in (1, 2, 3)]
    assert plan.forwarders["workers-host"].routes == [("/ps", "ps-host")]


@pytest.mark.parametrize("links, bottleneck, mtu, face", [
    ({}, {}, 1500, 1472),
    ({"mtu": 9000}, {}, 9000, 8800),         # an NDN packet's longest: nothing fragments
    ({"mtu": 4000}, {}, 4000, 3972),
    ({}, {"mtu": 9000}, 9000, 8800),         # the older key alone
    ({"mtu": 9000}, {"mtu": 9000}, 9000, 8800),
])
def test_links_mtu_is_the_veths_and_the_forwarders_udp_faces(tmp_path, links, bottleneck, mtu,
                                                              face):
    from ndnps.forwarder.config import parse_config, read_toml
    sc = parse({**BOTTLENECK, "links": links, "bottleneck": bottleneck}, "b")
    assert sc.links.mtu == sc.bottleneck.mtu == mtu
    plan = plan_hosts(sc)
    assign_addresses(plan, [("10.0.0.1", "10.0.0.2")], {}, False)
    for name, node in plan.forwarders.items():
        (tmp_path / f"{name}.toml").write_text(node.config(tmp_path, {}, 1.0))
        assert parse_config(read_toml(tmp_path / f"{name}.toml")).udp_faces.mtu == face
    # every topology in namespaces, each forwarder of it
    tree = parse({"topology": {"kind": "tree", "workers": 2}, "netns": {"enabled": True},
                  "links": links}, "t")
    assert {n.udp_mtu for n in plan_hosts(tree).forwarders.values()} == {
        face if "mtu" in links else 1472}


@pytest.mark.parametrize("doc, key", [
    ({"links": {"mtu": 9001}}, "links.mtu"),
    ({"links": {"mtu": 603}}, "links.mtu"),                  # datagrams shorter than 576
    ({"links": {"mtu": 1500.5}}, "links.mtu"),
    ({"links": {"mtu": "jumbo"}}, "links.mtu"),
    ({"links": {"mtu": True}}, "links.mtu"),
    ({"links": {"mtu": 9000}, "bottleneck": {"mtu": 1500}}, "bottleneck.mtu"),   # disagree
    ({"links": {"mtu": 1500}, "bottleneck": {"mtu": 9000}}, "bottleneck.mtu"),
    ({"bottleneck": {"mtu": 10000}}, "bottleneck.mtu"),
    ({"links": {"mtu": 9000}, "bottleneck": {"burst_bytes": 9000}}, "bottleneck.burst_bytes"),
    ({"links": {"mtu": 9000}, "bottleneck": {"queue_bytes": 9013}}, "bottleneck.queue_bytes"),
    ({"links": {"mtu": 9000, "rate_mbps": 10, "queue_bytes": 9000}}, "links.queue_bytes"),
])
def test_bad_mtus_name_the_key(doc, key):
    with pytest.raises(ScenarioError) as e:
        parse({**BOTTLENECK, "training": {"dataset": "synthetic"}, **doc}, "bad")
    assert str(e.value).startswith(key + ":")


def test_one_mtu_for_every_link():
    doc = {"topology": {"kind": "tree", "workers": 2},
           "link": [{"from": "root", "to": "leaf1", "mtu": 9000}]}
    with pytest.raises(ScenarioError, match=r"^link\[0\]\.mtu: one for every link"):
        parse(doc, "bad")
    with pytest.raises(ScenarioError, match=r"^link\[0\]\.reliability: one for every link"):
        parse({**doc, "link": [{"from": "root", "to": "leaf1", "reliability": True}]}, "bad")
    # the shipped scenario's MTU, replaced from the command line
    assert load("bottleneck", ["links.mtu=9000"]).bottleneck.mtu == 9000
    assert load("shared-bottleneck", ["links.mtu=9000"]).links.mtu == 9000
    # the TCP PS runs over the same veth: its MTU is no link condition it lacks
    assert load("bottleneck", ['run.system="tcp"', "links.mtu=9000"]).links.mtu == 9000



TC_JSON = json.dumps([
    {"kind": "tbf", "handle": "8001:", "root": True, "refcnt": 3,
     "options": {"rate": 12500000, "burst": 16375, "lat": 82576},
     "bytes": 9768212, "packets": 9441, "drops": 12, "overlimits": 20159, "requeues": 0,
     "backlog": 0, "qlen": 0},
    {"kind": "pfifo", "handle": "10:", "parent": "8001:1", "bytes": 1, "packets": 1}])


def test_tbf_counters_are_read_from_tcs_json():
    stats = netns.parse_qdisc_stats(TC_JSON)
    assert stats == {"kind": "tbf", "sent_bytes": 9768212, "sent_packets": 9441, "drops": 12,
                     "overlimits": 20159, "requeues": 0, "backlog_bytes": 0,
                     "backlog_packets": 0}
    with pytest.raises(ValueError, match="no root qdisc"):
        netns.parse_qdisc_stats("[]")


def test_summary_has_the_counters_per_direction_and_both_wire_limits():
    sc = parse({**BOTTLENECK, "topology": {"kind": "bottleneck", "workers": 8}}, "b")
    down = netns.parse_qdisc_stats(TC_JSON)
    up = {**down, "sent_packets": 10559, "drops": 0}
    m = 4_000_000                                   # bytes: at 12.5 MB/s, 0.32 s a model
    out = bottleneck_summary(sc, {"ps-host->workers-host": down,
                                         "workers-host->ps-host": up}, m, 3.2)
    assert out["wire_limit_seconds"] == pytest.approx({"ndnps": 9 * 0.32, "tcp": 16 * 0.32})
    assert out["iteration_over_wire_limit"] == pytest.approx({"ndnps": 3.2 / 2.88,
                                                              "tcp": 3.2 / 5.12})
    assert out["qdisc"]["ps-host->workers-host"]["drops_over_sent"] == pytest.approx(12 / 9441)
    assert (out["qdisc_sent_packets"], out["qdisc_drops"]) == (20000, 12)
    assert out["qdisc_drops_over_sent"] == pytest.approx(12 / 20000)
    assert (out["rate_mbps"], out["queue_bytes"], out["burst_bytes"]) == (100.0, 1 << 20, 16384)
    rows = dict(bottleneck_rows(out))
    assert rows["qdisc drops / packets sent"] == "12 / 20000 (0.06%)"
    # a run that failed before the link existed: the configuration, no counters
    failed = bottleneck_summary(sc, None, None, None)
    assert failed["qdisc"] is None and "wire_limit_seconds" not in failed
    assert bottleneck_rows(failed) == []


def test_the_tcp_baseline_trains_the_scenarios_training(tmp_path):
    sc = load("bottleneck", ['run.system="tcp"', "training.weight_decay=0.001",
                             "training.target_accuracy=0.9", "training.max_versions=0",
                             "training.epochs=2"])
    t = sc.training
    ps = tcp_ps.parser().parse_args(baseline.ps_argv(t, "10.0.0.1", tmp_path / "port",
                                                     tmp_path / "ps.jsonl")[3:])
    assert ps.cmd == "ps" and ps.host == "10.0.0.1" and ps.port == 0
    assert (ps.workers, ps.n_features, ps.hidden, ps.n_samples, ps.n_classes) == \
        (8, 1024, [768, 256], 20000, 10)
    assert (ps.batch, ps.lr, ps.momentum, ps.weight_decay, ps.seed) == \
        (t.sgd.batch, t.sgd.lr, t.sgd.momentum, 0.001, t.model.seed)
    assert (ps.eval_every, ps.target_accuracy) == (t.sgd.eval_every, 0.9)
    # versions as the ndnps PS counts them: epochs over the shard, capped by max_versions
    assert tcp_ps.total_versions(ps, 16_000) == 2 * steps_per_epoch(16_000, 8, t.sgd.batch)
    ps.max_versions = 5
    assert tcp_ps.total_versions(ps, 16_000) == 5
    w = tcp_ps.parser().parse_args(baseline.worker_argv(t, 3, "10.0.0.1", 4242,
                                                        tmp_path / "w4.jsonl")[3:])
    assert (w.cmd, w.index, w.connect, w.port, w.n_features) == ("worker", 3, "10.0.0.1", 4242,
                                                                 1024)
    assert baseline.env()["PYTHONPATH"].split(":")[0] == str(baseline.CHECKOUT)


def test_the_scenario_as_run_keeps_the_link_and_the_system(tmp_path):
    sc = load("bottleneck", ['run.system="tcp"', "bottleneck.queue_bytes=65536"])
    path = Runner(sc, tmp_path / "run", live=False).prepare()
    again = load(str(path))
    assert again.bottleneck == sc.bottleneck and again.system == "tcp"
    assert again.training == sc.training


def test_without_root_the_run_is_refused_naming_the_cause(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    with pytest.raises(netns.NetnsUnavailable, match='topology.kind = "bottleneck" runs in '
                                                     "network namespaces, which need root"):
        netns.check_available('topology.kind = "bottleneck"', tbf=True)
    out = tmp_path / "run"
    assert main(["bottleneck", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert 'topology.kind = "bottleneck"' in err and "root" in err and not out.exists()


def test_without_the_checkout_the_tcp_baseline_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(baseline, "CHECKOUT", tmp_path)
    with pytest.raises(ScenarioError, match="^run.system: .*bench/tcp_ps.py"):
        baseline.check_available()
    assert Path(baseline.CHECKOUT) == tmp_path


@pytest.mark.parametrize("name, versions", [("bottleneck", 60), ("shared-bottleneck", 30)])
def test_the_runs_notes_say_it_measures_the_link_not_the_accuracy(tmp_path, name, versions):
    # a short training of a 1M-parameter model: its accuracy alone reads as a broken run
    sc = load(name)
    runner = Runner(sc, tmp_path / "run", live=False)
    runner.prepare()
    (note,) = [n for n in runner.notes if "measures the link" in n]
    assert note.startswith(f"{name} measures the link") and f"{versions} versions" in note
    assert "not the model's accuracy" in sc.description
    other = Runner(load("sync-sgd"), tmp_path / "other", live=False)
    other.prepare()
    assert not any("measures the link" in n for n in other.notes)
