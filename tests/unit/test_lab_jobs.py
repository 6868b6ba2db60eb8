"""Several trainings in one scenario ([[jobs]]): parsing, where each job's apps run and how
they are routed, the files the runner writes, and how the summary reports their sharing."""
from __future__ import annotations

import json
import tomllib

import pytest

from ndnps.lab import report
from ndnps.lab.jobs import jain_index, job_rows, sharing_summary
from ndnps.lab.runner import Runner
from ndnps.lab.series import PsRun, ps_run
from ndnps.lab.spec import ScenarioError, load, parse
from ndnps.lab.topology import plan_bottleneck, plan_local, plan_netns

TWO = {"topology": {"kind": "star", "workers": 2}, "training": {"key": "k", "lr": 0.1},
       "jobs": [{}, {"ps": "big", "workers": ["a", "b", "c"], "lr": 0.2}]}


def test_each_job_is_the_training_with_its_own_keys():
    sc = parse(TWO, "two")
    one, two = sc.all_jobs
    assert (one.who.ps, one.who.workers, one.sgd.lr, one.who.key) == \
        ("ps1", ("ps1-w1", "ps1-w2"), 0.1, "k")
    assert (two.who.ps, two.who.workers, two.sgd.lr, two.who.key) == \
        ("big", ("a", "b", "c"), 0.2, "k")
    assert sc.training is one and sc.worker_names == ["ps1-w1", "ps1-w2", "a", "b", "c"]
    assert sc.job_of("b") is two and sc.job_of("ps1") is one
    # without [[jobs]]: one job, the training
    single = parse({"topology": {"kind": "star", "workers": 2}}, "one")
    assert single.all_jobs == [single.training] and single.jobs == []


@pytest.mark.parametrize("jobs, message", [
    ({}, "jobs: expected an array of tables"),
    ([], "jobs: expected an array of tables"),
    ([{"ps": "a"}, {"ps": "a"}], "jobs[1].ps: 'a' is already jobs[0]'s"),
    ([{"workers": ["x"]}, {"workers": ["x"]}], "jobs[1].workers: 'x' is already a worker of "
                                               "jobs[0]"),
    ([{}, {"ps": "ps1-w1"}], "jobs[1].ps: 'ps1-w1' is already a worker of jobs[0]"),
    ([{"lr": "fast"}], "jobs[0].lr: expected a number"),
    ([{"workers": 0}], "jobs[0].workers: must be within"),
    ([{"colour": 1}], "jobs[0].colour: unknown key"),
])
def test_bad_jobs_name_the_entry_and_key(jobs, message):
    with pytest.raises(ScenarioError) as e:
        parse({**TWO, "jobs": jobs}, "bad")
    assert str(e.value).startswith(message)


def test_faults_are_refused_with_several_jobs_and_slowdown_finds_any_jobs_worker():
    with pytest.raises(ScenarioError, match="^faults: not with several"):
        parse({**TWO, "faults": {"kill": [{"worker": "a", "at_version": 3}]}}, "bad")
    sc = parse({**TWO, "workers": {"slowdown": {"b": 2.0}}}, "slow")
    assert sc.slowdown == {"b": 2.0}


def test_every_ps_on_the_ps_host_every_worker_behind_the_link():
    sc = parse({**TWO, "topology": {"kind": "bottleneck", "workers": 2}}, "b")
    plan = plan_bottleneck(sc)
    assert [(a.name, a.role, a.forwarder) for a in plan.apps] == [
        ("ps1", "ps", "ps-host"), ("ps1-w1", "worker", "workers-host"),
        ("ps1-w2", "worker", "workers-host"), ("big", "ps", "ps-host"),
        *((w, "worker", "workers-host") for w in "abc")]
    assert plan.forwarders["workers-host"].routes == [("/ps1", "ps-host"), ("/big", "ps-host")]
    assert [p for p, _ in plan.forwarders["ps-host"].routes] == [
        "/ps1-w1", "/ps1-w2", "/a", "/b", "/c"]


def test_a_tree_routes_every_jobs_ps_and_workers():
    sc = parse({**TWO, "topology": {"kind": "tree", "workers": 2, "leaves": 2}}, "t")
    plan = plan_local(sc)
    assert {a.name: a.forwarder for a in plan.apps} == {
        "ps1": "root", "big": "root", "ps1-w1": "leaf1", "ps1-w2": "leaf2", "a": "leaf1",
        "b": "leaf2", "c": "leaf1"}
    for leaf in ("leaf1", "leaf2"):
        assert plan.forwarders[leaf].routes == [("/ps1", "root"), ("/big", "root")]
    assert ("/c", "leaf1") in plan.forwarders["root"].routes
    hosts = plan_netns(sc)                     # one host per app, routed to its own PS only
    assert hosts.forwarders["h-a"].routes == [("/big", "leaf1")]
    assert hosts.forwarders["h-big"].routes == [(f"/{w}", "root") for w in "abc"]


def test_the_runner_writes_a_training_file_per_job(tmp_path):
    sc = parse(TWO, "two")
    runner = Runner(sc, tmp_path / "run", live=False)
    as_run = runner.prepare()
    again = load(str(as_run))
    assert [j.as_table() for j in again.all_jobs] == [j.as_table() for j in sc.all_jobs]
    for job in sc.all_jobs:
        table = tomllib.loads(runner.job_configs[job.who.ps].read_text())["training"]
        assert table == json.loads(json.dumps(job.as_table()))
    # one job: its file is the scenario's
    single = Runner(parse({"topology": {"kind": "star", "workers": 2}}, "one"),
                    tmp_path / "one", live=False)
    path = single.prepare()
    assert single.job_configs == {"ps": path}


def _versions(start: float, step: float, n: int) -> list[dict]:
    return [{"t": start + i * step, "version": i + 1} for i in range(n)]


def _run(records: list[dict]) -> PsRun:
    return ps_run([{"event": "start", "t": records[0]["t"] - 1, "n_params": 1000}]
                         + records)


def test_jain_index():
    assert jain_index([5.0, 5.0]) == pytest.approx(1.0)
    assert jain_index([10.0, 0.0]) == pytest.approx(0.5)
    assert jain_index([3.0, 1.0]) == pytest.approx(16 / 20)
    assert jain_index([]) is None and jain_index([0.0, 0.0]) is None


def test_sharing_is_measured_over_the_time_both_jobs_ran_steadily():
    # job a: a version every 2 s from t = 10; job b: every 1 s from t = 14 (after its
    # warm-up) until t = 33; b moves half the bytes a version that a does
    a = _run(_versions(10.0, 2.0, 20))           # steady from version 3 (t = 14) to t = 48
    b = _run(_versions(12.0, 1.0, 22))           # steady from version 3 (t = 14) to t = 33
    out = sharing_summary({"a": a, "b": b}, {"a": 1_000_000, "b": 500_000})
    assert out["overlap"] == [14.0, 33.0]
    assert out["jobs"]["a"]["versions_per_s"] == pytest.approx(0.5)
    assert out["jobs"]["b"]["versions_per_s"] == pytest.approx(1.0)
    # equal byte rates: 0.5 x 1 MB and 1.0 x 0.5 MB a second
    assert out["jobs"]["a"]["wire_mbps"] == pytest.approx(4.0)
    assert out["jain_index"] == pytest.approx(1.0)
    assert out["share_range"] == pytest.approx([1.0, 1.0])
    # a twice as fast in bytes: shares 4/3 and 2/3, Jain 0.9
    out = sharing_summary({"a": a, "b": b}, {"a": 2_000_000, "b": 500_000})
    assert out["jobs"]["a"]["over_equal_share"] == pytest.approx(4 / 3)
    assert out["share_range"] == pytest.approx([2 / 3, 4 / 3])
    assert out["jain_index"] == pytest.approx(0.9)


def test_progress_between_versions_is_interpolated():
    a = _run(_versions(0.0, 4.0, 10))            # steady from t = 8
    b = _run(_versions(7.0, 1.0, 12))            # steady from t = 9 to t = 18
    out = sharing_summary({"a": a, "b": b}, {"a": 1, "b": 1})
    assert out["overlap"] == [9.0, 18.0]
    assert out["jobs"]["a"]["versions_per_s"] == pytest.approx(0.25)   # not 2 or 3 versions / 9 s


def test_jobs_that_did_not_overlap_get_no_shares():
    a, b = _run(_versions(0.0, 1.0, 5)), _run(_versions(100.0, 1.0, 5))
    assert sharing_summary({"a": a, "b": b}, {"a": 1, "b": 1}) == {
        "overlap_seconds": 0.0, "note": "the jobs' steady versions did not overlap"}
    short = _run(_versions(0.0, 1.0, 3))         # one steady version
    assert sharing_summary({"a": a, "b": short}, {"a": 1, "b": 1})["overlap_seconds"] \
        is None


def test_the_summary_reports_each_job_and_their_sharing(tmp_path):
    sc = parse(TWO, "two")
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    for ps, step, params in (("ps1", 1.0, 1000), ("big", 2.0, 500)):
        recs = [{"event": "start", "t": 0.5, "n_params": params}] + [
            {**r, "bytes_sent": params * 4, "accuracy": 0.5} for r in _versions(1.0, step, 30)]
        recs.append({"event": "end", "t": 61.0, "version": 30, "accuracy": 0.9})
        (metrics / f"{ps}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    s = report.summarize(tmp_path, sc, 62.0)
    assert [j["ps"] for j in s["jobs"]] == ["ps1", "big"]
    assert s["jobs"][1]["workers"] == 3 and s["jobs"][1]["iteration_seconds"] == 2.0
    assert s["final_accuracy"] == 0.9 and s["workers"] == 2        # top level: the first job
    shares = s["sharing"]["jobs"]
    # ps1: 1 version/s x 3 x 4000 B; big: 0.5 version/s x 4 x 2000 B
    assert shares["ps1"]["wire_mbps"] == pytest.approx(12000 * 8 / 1e6)
    assert shares["big"]["wire_mbps"] == pytest.approx(4000 * 8 / 1e6)
    rows = dict(job_rows(s))
    assert rows["job big: accuracy, versions, iteration (s), share"].startswith(
        "0.9000, 30, 2.000, 0.0 Mbit/s = 0.50 of equal")
    assert rows["Jain's index (overlap, s)"].startswith("0.8000")
