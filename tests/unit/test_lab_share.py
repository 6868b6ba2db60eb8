"""Several jobs sharing one aggregator in a scenario ([share]): what the spec refuses
(each error naming the key), what each policy does to the jobs, the ranges of the pool, the
routes to the controller, and the run's invariants counted from crafted records."""
from __future__ import annotations

import json

import pytest

from ndnps.lab import share, topology
from ndnps.lab.spec import ScenarioError, parse
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


@pytest.mark.parametrize("policy", share.POLICIES)
def test_each_policy_sets_the_jobs_up(policy):
    sc = parse(doc(policy), "t")
    a, b, c = sc.jobs
    assert sc.share.policy == policy and sc.job_start == {"b": 1.5}
    if policy == "never":
        assert [j.aggregate_at for j in sc.jobs] == ["", "", ""]
        assert b.collective == "ring"               # the peers' ordinary way
        again = parse({**doc(policy), "jobs": [j.as_dict() for j in sc.jobs]}, "as run")
        assert again.jobs[1].collective == "ring"   # the scenario as run reads back
    else:
        assert [j.aggregate_at for j in sc.jobs] == ["root"] * 3 and b.collective == "ina"
        expected = "ctl" if policy in ("time-division", "always-wait") else ""
        assert [j.share_controller for j in sc.jobs] == [expected] * 3
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
    peers = sc.jobs[1].workers
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


def test_the_lab_knows_every_score_the_controller_has():
    from ndnps.exchanges.sharing.decision import SCORES
    assert set(share.SCORES) == set(SCORES)


@pytest.mark.parametrize("table, key", [
    ({"share_controller": "ctl"}, "training.share_controller"),                 # no aggregator
    ({"share_controller": "ctl", "aggregate_at": "fwd", "collective": "ring"},
     "training.share_controller"),
    ({"share_controller": "ctl", "aggregate_at": "fwd", "collective": "ina",
      "on_peer_loss": "re-form"}, "training.share_controller"),
    ({"share_controller": "c/d", "aggregate_at": "fwd"}, "training.share_controller"),
])
def test_the_training_config_refuses_what_sharing_cannot_do(table, key):
    from ndnps.protocol.config import ConfigError, from_table
    with pytest.raises(ConfigError) as e:
        from_table({"workers": ["a", "b"], "key": "k", **table})
    assert str(e.value).startswith(key), str(e.value)
