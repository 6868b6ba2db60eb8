"""summary.json's block for a PS-less run (ndnps/lab/peers.py), from peers' metrics files
written here: parameters compared version by version, the synchronisation time, and the
bytes per peer face beside the analytic value, for a star and for a BCube fabric."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from ndnps.lab.peers import collective_summary, face_bytes
from ndnps.protocol.config import from_table

PEERS = ["w1", "w2", "w3", "w4"]


def job(collective: str = "ring", **more):
    return from_table({"workers": PEERS, "collective": collective, "key": "k",
                       **({"aggregate_at": "fwd"} if collective == "ina" else {}), **more})


def record(v: int, digest: str = "d", computed_at: float = 0.0, ready_at: float = 0.0,
           sent: dict[str, int] | None = None) -> dict:
    return {"version": v, "digest": digest, "computed_at": computed_at, "ready_at": ready_at,
            "sync": ready_at - computed_at, "loss": 1.0,
            "sent_by_level": sent if sent is not None else {"0": 100}}


def write(run_dir: Path, peer: str, records: list[dict],
          analytic: dict[str, float] | None = None) -> None:
    path = run_dir / "metrics" / f"{peer}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    start = {"event": "start", "version": 0, "workers": PEERS, "role": "peer", "name": peer}
    if analytic is not None:
        start["analytic_bytes_by_level"] = analytic
    lines = [start, *records, {"event": "end", "code": 0, "version": len(records)}]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))


def identical(run_dir: Path, versions: int, analytic: dict[str, float] | None = None,
              sent: dict[str, int] | None = None) -> None:
    for p in PEERS:
        write(run_dir, p, [record(v, f"digest{v}", sent=sent) for v in range(1, versions + 1)],
              analytic if analytic is not None else {"0": 1000.0})


def test_identical_digests_at_every_peer(tmp_path):
    identical(tmp_path, 6)
    s = collective_summary(tmp_path, job(), 6, {}, PEERS)
    assert s["kind"] == "ring" and s["peers"] == 4 and "bcube" not in s
    assert s["parameters_identical"] is True and s["digest_mismatches"] == []
    assert s["versions_compared"] == 6


def test_a_mismatch_is_listed_by_version(tmp_path):
    for p in PEERS:
        write(tmp_path, p, [record(v, "odd" if (p, v) in {("w3", 4), ("w1", 6)} else f"d{v}")
                            for v in range(1, 8)], {"0": 1.0})
    s = collective_summary(tmp_path, job(), 7, {}, PEERS)
    assert s["parameters_identical"] is False and s["digest_mismatches"] == [4, 6]
    assert s["versions_compared"] == 7


def test_versions_a_peer_did_not_make_are_compared_among_those_that_did(tmp_path):
    """A peer that stopped early (killed): its versions are compared while it ran, the later
    ones among the others (a re-formed collective's)."""
    for p in PEERS:
        n = 3 if p == "w2" else 5
        write(tmp_path, p, [record(v, f"d{v}") for v in range(1, n + 1)], {"0": 1.0})
    s = collective_summary(tmp_path, job(), 5, {}, PEERS)
    assert s["parameters_identical"] is True and s["versions_compared"] == 5
    assert s["sync_seconds"] is not None
    # a peer without a metrics file at all: the others' versions still compared
    (tmp_path / "metrics" / "w4.jsonl").unlink()
    s = collective_summary(tmp_path, job(), 5, {}, PEERS)
    assert s["versions_compared"] == 5 and s["parameters_identical"] is True
    # one peer alone made a version: nothing to compare it with
    write(tmp_path, "w1", [record(v, f"d{v}") for v in range(1, 7)], {"0": 1.0})
    assert collective_summary(tmp_path, job(), 6, {}, PEERS)["versions_compared"] == 5


def test_a_lost_peers_versions_the_re_formed_collective_redid_are_not_compared(tmp_path):
    """w2 finished version 5 and died; w4 was still at 4, so the survivors went on from 4 and
    made 5 again without w2: w2's 5 is another collective's, w1's first 5 superseded."""
    reformed = {"event": "reformed", "epoch": 1, "peers": ["w1", "w3", "w4"], "lost": ["w2"],
                "version": 4, "t": 9.0}
    write(tmp_path, "w2", [record(v, f"d{v}") for v in range(1, 6)], {"0": 1.0})
    for p in ("w1", "w3", "w4"):
        before = [record(v, f"d{v}") for v in range(1, 6 if p == "w1" else 5)]
        write(tmp_path, p, [*before, reformed, *(record(v, f"r{v}") for v in range(5, 8))],
              {"0": 1.0})
    s = collective_summary(tmp_path, job(), 7, {}, PEERS)
    assert s["parameters_identical"] is True and s["versions_compared"] == 7
    assert s["reformed"] == [{k: reformed[k] for k in ("epoch", "peers", "lost", "version",
                                                         "t")}]
    # a survivor that disagrees on a redone version is still caught
    write(tmp_path, "w3", [*(record(v, f"d{v}") for v in range(1, 5)), reformed,
                           record(5, "odd"), record(6, "r6"), record(7, "r7")], {"0": 1.0})
    assert collective_summary(tmp_path, job(), 7, {}, PEERS)["digest_mismatches"] == [5]


def test_sync_seconds_is_the_median_of_last_ready_minus_last_computed_after_warm_up(tmp_path):
    # per version v: the peers compute at base + i*0.01 and are ready at base + extra
    # (the last one's), so the version's sync is max(ready) - max(computed)
    syncs = {1: 5.0, 2: 7.0, 3: 0.2, 4: 0.4, 5: 0.1, 6: 0.3, 7: 0.25}
    for i, p in enumerate(PEERS):
        recs = []
        for v, sync in syncs.items():
            base = 10.0 * v
            last_computed = base + 0.03                 # w4's
            recs.append(record(v, f"d{v}", computed_at=base + i * 0.01,
                               ready_at=last_computed + sync - (0.05 if i else 0.0)))
        write(tmp_path, p, recs, {"0": 1.0})
    s = collective_summary(tmp_path, job(), 7, {}, PEERS)
    # versions 1 and 2 (start-up) are left out: median of 0.2, 0.4, 0.1, 0.3, 0.25
    assert s["sync_seconds"] == pytest.approx(0.25)
    # with only warm-up versions, those are all there is
    for p in PEERS:
        write(tmp_path, p, [record(1, "d", 0.0, 2.0), record(2, "e", 3.0, 3.5)], {"0": 1.0})
    s = collective_summary(tmp_path, job(), 2, {}, PEERS)
    assert s["sync_seconds"] == pytest.approx(statistics.median([2.0, 0.5]))


def test_the_analytic_bytes_are_the_mean_of_the_peers_start_records(tmp_path):
    analytics = [{"0": 100.0, "1": 40.0}, {"0": 102.0, "1": 42.0}, {"0": 98.0, "1": 38.0},
                 {"0": 100.0}]                       # a level this peer sends nothing at: 0
    for p, a in zip(PEERS, analytics):
        write(tmp_path, p, [record(v, f"d{v}") for v in range(1, 5)], a)
    s = collective_summary(tmp_path, job(), 4, {}, PEERS)
    assert s["analytic_bytes_per_peer_face_per_version"] == {"0": pytest.approx(100.0),
                                                             "1": pytest.approx(30.0)}


def test_a_star_counts_each_peers_face_to_the_forwarder(tmp_path):
    identical(tmp_path, 10, analytic={"0": 1000.0}, sent={"0": 1050})
    links = {"w1->fwd": 11_000, "w2->fwd": 12_000, "w3->fwd": 13_000, "w4->fwd": 12_000,
             "fwd->w1": 99_000, "fwd->w2": 1, "fwd->w3": 1, "fwd->w4": 1}
    s = collective_summary(tmp_path, job("ina"), 10, links, PEERS)
    assert s["kind"] == "ina"
    assert s["bytes_per_peer_face_per_version"] == {"0": pytest.approx(1200.0)}
    assert s["bytes_over_analytic"] == {"0": pytest.approx(1.2)}
    assert s["data_bytes_sent_per_peer_per_version"] == {"0": pytest.approx(1050.0)}
    assert s["max_link_bytes_per_version"] is None          # a local star: sockets only


def test_a_bcube_counts_each_hosts_uplinks_by_level_and_not_its_apps_face(tmp_path):
    """BCube(2, 2): peer i's traffic leaves its host forwarder p<i> over one uplink per level
    (p<i>->s<level>-<j>); p<i>->w<i+1> is the host's face to its own app: not counted."""
    for p in PEERS:
        write(tmp_path, p, [record(v, f"d{v}", sent={"0": 500, "1": 520})
                            for v in range(1, 6)], {"0": 480.0, "1": 480.0})
    links = {
        "p0->s0-0": 2500, "p0->s1-0": 2600, "p0->w1": 99_999,
        "p1->s0-0": 2500, "p1->s1-1": 2600, "p1->w2": 99_999,
        "p2->s0-1": 2700, "p2->s1-0": 2800, "p2->w3": 99_999,
        "p3->s0-1": 2300, "p3->s1-1": 2400, "p3->w4": 99_999,
        "s0-0->p0": 1, "s1-1->p3": 1, "w1->p0": 5, "w4->p3": 5,
    }
    senders = [f"p{i}" for i in range(4)]
    assert face_bytes(links, senders, bcube=True) == {
        "0": [2500, 2500, 2700, 2300], "1": [2600, 2600, 2800, 2400]}
    s = collective_summary(tmp_path, job("bcube", bcube_n=2), 5, links, senders, bcube=True)
    assert s["kind"] == "bcube" and s["bcube"] == {"n": 2, "k": 2}
    assert s["bytes_per_peer_face_per_version"] == {"0": pytest.approx(500.0),
                                                    "1": pytest.approx(520.0)}
    assert s["analytic_bytes_per_peer_face_per_version"] == {"0": 480.0, "1": 480.0}
    assert s["bytes_over_analytic"] == {"0": pytest.approx(500 / 480),
                                        "1": pytest.approx(520 / 480)}
    assert s["data_bytes_sent_per_peer_per_version"] == {"0": pytest.approx(500.0),
                                                         "1": pytest.approx(520.0)}
    # the busiest direction of a link between forwarders (not an app's face)
    assert s["max_link_bytes_per_version"] == pytest.approx(2800 / 5)
    # a ring (or an aggregator's peers) on a BCube: every uplink, one figure
    assert face_bytes(links, senders, bcube=True, by_level=False) == {
        "0": [5100, 5100, 5500, 4700]}


def test_without_link_counts_the_apps_own_data_counts_stand_in(tmp_path):
    for p in PEERS:
        # the first two versions (start-up) are left out of the apps' counts
        write(tmp_path, p, [record(v, f"d{v}", sent={"0": 9999 if v <= 2 else 300})
                            for v in range(1, 7)], {"0": 250.0})
    s = collective_summary(tmp_path, job(), 6, {}, PEERS)
    assert s["data_bytes_sent_per_peer_per_version"] == {"0": pytest.approx(300.0)}
    assert s["bytes_per_peer_face_per_version"] == {"0": pytest.approx(300.0)}
    assert s["bytes_over_analytic"] == {"0": pytest.approx(1.2)}
    assert s["max_link_bytes_per_version"] is None


def test_netns_hosts_are_the_senders_on_a_star():
    links = {"h-w1->fwd": 10, "h-w2->fwd": 20, "fwd->h-w1": 7, "w1->h-w1": 1000}
    assert face_bytes(links, ["h-w1", "h-w2"], bcube=False) == {"0": [10, 20]}


def test_the_final_table_of_a_ps_less_run_shows_what_it_promises():
    from ndnps.lab.peers import Collective
    summary = {"scenario": "ring", "collective": "ring", "peers": 4, "final_accuracy": 0.9,
               "versions": 40, "model_bytes": 10_000, "parameters_identical": True,
               "versions_compared": 40, "bytes_over_analytic": {"0": 1.04},
               "sync_seconds": 0.012, "iteration_seconds": 0.05,
               "max_link_bytes_per_version": None, "retransmissions": 0, "faults": [],
               "reformed": [], "wall_seconds": 9.0,
               "ps_bytes_out_per_version_over_model": 1.86}
    rows = dict(Collective().rows(summary, [("mode", "sync / persistent")]))
    assert rows["collective"] == "ring, 4 peers"
    assert rows["parameters identical (versions compared)"] == "True (40)"
    assert rows["bytes on a peer's face per version / analytic"] == "1.04"
    assert rows["sync (median, s)"] == 0.012
    assert "mode" not in rows and not any(k.startswith("PS ") for k in rows)
    bcube = dict(Collective().rows({**summary, "bcube": {"n": 2, "k": 2},
                                    "bytes_over_analytic": {"0": 1.0, "1": 1.1}}, []))
    assert bcube["collective"] == "ring, 4 peers, BCube(2, 2)"
    assert bcube["bytes on a peer's face per version / analytic"] == \
        "level 0: 1.00, level 1: 1.10"
