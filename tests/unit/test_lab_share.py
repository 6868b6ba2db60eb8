"""Several jobs sharing one aggregator in a scenario ([share]): what the spec refuses
(each error naming the key), what each policy does to the jobs, the ranges of the pool, the
routes to the controller, the run's invariants counted from crafted records; and [share]'s one
model, which the scenario and the controller read alike."""
from __future__ import annotations

import json

import pytest

from ndnps.lab import share, topology
from ndnps.lab.spec import ScenarioError, parse
from ndnps.lab.tomltext import to_toml
from ndnps.protocol.config import ConfigError, load_controller
from ndnps.protocol.sharing import (CONTROLLED_POLICIES, SCORE_NAMES, SHARE_POLICIES, ShareConfig,
                                    read_share)
from tests.support.plans import walk


def doc(policy: str = "time-division", topo: dict | None = None, **more) -> dict:
    """Two PS jobs and a job of "ina" peers on a two-leaf tree."""
    out = {"topology": {"kind": "tree", "leaves": 2, "workers": 2, **(topo or {})},
           "training": {"mode": "sync"},
           "share": {"policy": policy, "slots": 12},
           "jobs": [{"ps": "a", "key": "ka"},
                    {"ps": "b", "key": "kb", "collective": "ina", "workers": 3, "start": 1.5},
                    {"ps": "c", "key": "kc", "workers": 1}]}
    for k, v in more.items():
        out[k] = {**out.get(k, {}), **v} if isinstance(v, dict) else v
    return out


@pytest.mark.parametrize("document, key", [
    (doc(share={"policy": "fifo"}), "share.policy"),
    (doc(share={"score": "bytes"}), "share.score"),
    (doc(share={"at": "leaf1"}), "share.at"),
    (doc(share={"at": "nowhere"}), "share.at"),
    (doc(share={"slots": 0}), "share.slots"),
    (doc(share={"colour": 1}), "share.colour"),
    (doc("spatial", share={"slots": 2}), "share.slots"),
    (doc(netns={"enabled": True}), "share"),
    (doc(ina={"k": 1}), "ina"),
    (doc(jobs=[{"ps": "a", "key": "ka"}, {"ps": "r", "key": "kr", "collective": "ring"}]),
     "jobs[1].collective"),
    (doc(jobs=[{"ps": "a", "key": "ka"}, {"ps": "b"}]), "jobs[1]"),
    (doc(jobs=[{"ps": "a", "key": "ka", "start": -1}]), "jobs[0].start"),
], ids=["policy", "score", "at-leaf", "at-unknown", "slots", "unknown-key", "spatial-slots",
        "netns", "with-ina", "ring-job", "no-key", "start"])
def test_refusals_name_the_key(document, key):
    with pytest.raises(ScenarioError) as e:
        parse(document, "t")
    assert str(e.value).startswith(key), str(e.value)


@pytest.mark.parametrize("policy", SHARE_POLICIES)
def test_each_policy_sets_the_jobs_up(policy):
    sc = parse(doc(policy), "t")
    a, b, c = sc.jobs
    assert sc.share.policy == policy and sc.job_start == {"b": 1.5}
    if policy == "never":
        assert [j.aggregation.aggregate_at for j in sc.jobs] == ["", "", ""]
        assert b.peers.collective == "ring"         # the peers' ordinary way
        again = parse({**doc(policy), "jobs": [j.as_table() for j in sc.jobs]}, "as run")
        assert again.jobs[1].peers.collective == "ring"   # the scenario as run reads back
    else:
        assert [j.aggregation.aggregate_at for j in sc.jobs] == ["root"] * 3
        assert b.peers.collective == "ina"
        expected = "ctl" if policy in ("time-division", "always-wait") else ""
        assert [j.sharing.share_controller for j in sc.jobs] == [expected] * 3
    ranges = share.ranges(sc.share, sc.jobs)
    if policy == "spatial":
        assert ranges == {"a": (0, 4), "b": (4, 4), "c": (8, 4)}    # disjoint, ATP-style
    else:
        assert set(ranges.values()) == {(0, 12)}                    # one pool, in turns


def test_every_node_reaches_the_controller_and_the_aggregator():
    sc = parse(doc(), "t")
    plan = topology.plan_local(sc)
    share.routes(sc.share, sc, plan.forwarders)
    for app in plan.apps:
        assert walk(plan, app.forwarder, "/ctl", "root")[-1] == "root"
    cfg = share.controller_config(sc.share, sc.jobs)
    assert cfg["share"]["name"] == "ctl" and [j["ps"] for j in cfg["jobs"]] == ["a", "b", "c"]


def _write(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_the_invariants_are_counted_from_the_nodes_and_the_aggregator(tmp_path):
    sc = parse(doc(), "t")
    m = tmp_path / "metrics"
    _write(m / "a.jsonl", [{"event": "start", "t": 1.0}] + [
        {"version": v + 1, "t": 1.0 + v, "share": "aggregate" if v % 2 else "ordinary",
         "share_round": v, "share_wait": 0.01 * v, "accuracy": 0.9} for v in range(4)])
    peers = sc.jobs[1].who.workers
    for i, p in enumerate(peers):
        # round 2: the last peer went the ordinary way alone
        _write(m / f"{p}.jsonl", [{"event": "start", "t": 2.0}] + [
            {"version": v + 1, "t": 2.0 + v, "share_round": v, "share_wait": 0.0,
             "share": "ordinary" if (v == 2 and i == 2) else "aggregate"} for v in range(3)])
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "root-status.json").write_text(json.dumps(
        {"aggregation": {"counters": {"overlaps": 0}, "pool": {"busy_seconds": 2.5}}}))
    _write(m / "ctl.jsonl", [{"event": "end", "busy_seconds": 2.4, "unanswered": 0,
                              "jobs": {"a/t1": {"aborts": 2, "gave_up": 1}}}])
    s = share.share_summary(sc.share, sc, tmp_path, wall_seconds=10.0)
    assert s["decision_mismatches"] == 1
    assert s["mismatched_rounds"][0]["round"] == 2 and s["mismatched_rounds"][0]["job"] == "b"
    assert s["ina_overlap_violations"] == 0 and s["aggregator_busy_fraction"] == 0.25
    a = s["jobs"]["a"]
    assert a["rounds"] == {"ordinary": 2, "aggregate": 2} and a["completion_seconds"] == 3.0
    assert a["round_wait_mean"] == pytest.approx(0.015) and a["round_wait_p99"] == 0.03
    assert s["controller"]["aborts"] == 2 and s["controller"]["gave_up"] == 1


def test_the_scores_and_the_policies_have_one_source_each():
    from ndnps.exchanges.sharing.agreement import Controller
    from ndnps.exchanges.sharing.decision import SCORES
    assert tuple(SCORES) == SCORE_NAMES             # a function for every name [share] takes
    assert set(CONTROLLED_POLICIES) < set(SHARE_POLICIES)
    for policy in CONTROLLED_POLICIES:              # what a controller runs...
        Controller({"j": ["a"]}, policy)
    for policy in set(SHARE_POLICIES) - set(CONTROLLED_POLICIES):   # ... and what it does not
        with pytest.raises(ValueError):
            Controller({"j": ["a"]}, policy)


def test_share_has_one_model_the_scenario_and_the_controller_read(tmp_path):
    sc = parse(doc(share={"agree_timeout": 0.5, "hold_limit": 9.0, "tries": 2}), "t")
    assert isinstance(sc.share, ShareConfig) and sc.share.at == "root"
    path = tmp_path / "share.toml"
    path.write_text(to_toml(share.controller_config(sc.share, sc.jobs)))
    cfg = load_controller(path)
    assert cfg.share == sc.share                     # the same model, read back as it was
    assert [j.nodes for j in cfg.jobs] == [tuple(j.nodes) for j in sc.jobs]
    assert [j.who for j in cfg.jobs] == [j.who for j in sc.jobs]


@pytest.mark.parametrize("table, message", [
    ({"timeout": 0}, "share.timeout: must be >= 0.01"),        # the older key, as written
    ({"timeout": float("nan")}, "share.timeout: expected a finite number"),
    ({"agree_timeout": 61}, "share.agree_timeout: must be <= 60"),
    ({"timeout": 1.0, "agree_timeout": 1.0}, "share.timeout: the older name of "
                                             "share.agree_timeout"),
    ({"slots": 1.5}, "share.slots: expected an integer"),
    ({"backoff": float("inf")}, "share.backoff: expected a finite number"),
    ({"name": "a/b"}, "share.name"),
    ({"colour": 1}, "share.colour: unknown key"),
])
def test_share_refuses_its_bad_values_naming_the_key_as_written(tmp_path, table, message):
    with pytest.raises(ConfigError) as e:
        read_share(table)
    assert str(e.value).startswith(message), str(e.value)
    with pytest.raises(ScenarioError) as s:             # in a scenario
        parse(doc(share=table), "t")
    assert str(s.value).startswith(message), str(s.value)
    path = tmp_path / "share.toml"                      # in the controller's file
    path.write_text(to_toml({"share": table, "jobs": [{"ps": "a", "key": "k"}]}))
    with pytest.raises(ConfigError) as c:
        load_controller(path)
    assert str(c.value).startswith(message), str(c.value)


def test_the_older_timeout_key_is_read_as_the_agreement_timeout(tmp_path):
    assert read_share({"timeout": 0.5}) == ShareConfig(agree_timeout=0.5)
    assert parse(doc(share={"timeout": 0.5}), "t").share.agree_timeout == 0.5
    path = tmp_path / "share.toml"
    path.write_text('[share]\ntimeout = 0.5\n[[jobs]]\nps = "a"\nkey = "k"\n')
    assert load_controller(path).share.agree_timeout == 0.5
    path.write_text('[share]\npolicy = "spatial"\n[[jobs]]\nps = "a"\nkey = "k"\n')
    with pytest.raises(ConfigError, match="^share.policy: one of time-division, always-wait"):
        load_controller(path)


@pytest.mark.parametrize("table, key", [
    ({"share_controller": "ctl"}, "training.share_controller"),                 # no aggregator
    ({"share_controller": "ctl", "aggregate_at": "fwd", "collective": "ring"},
     "training.share_controller"),
    ({"share_controller": "ctl", "aggregate_at": "fwd", "collective": "ina",
      "on_peer_loss": "re-form"}, "training.share_controller"),
    ({"share_controller": "c/d", "aggregate_at": "fwd"}, "training.share_controller"),
])
def test_the_training_config_refuses_what_sharing_cannot_do(table, key):
    from ndnps.protocol.config import from_table
    with pytest.raises(ConfigError) as e:
        from_table({"workers": ["a", "b"], "key": "k", **table})
    assert str(e.value).startswith(key), str(e.value)
