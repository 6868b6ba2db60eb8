"""PS-less training (`training.collective`: ring, ina, bcube; docs/collectives.md) in a
scenario: its defaults and checks, its peers' program, and summary.json's `collective` figures,
from every peer's version records (ndnps.apps.peer):

* `parameters_identical`: every version's parameter digest is the same at every peer that
  made it (`digest_mismatches` lists the versions where not; the runner fails such a run;
  `versions_compared`: the versions two peers or more made); `reformed`: each epoch a lost
  peer's collective re-formed in (its peers, the lost, the version it went on from; what the
  lost peer made after that version, the survivors made again without it: not compared);
* `sync_seconds`: the median over steady versions of "from the last gradient computed to the
  last peer holding the new parameters" (max ready_at − max computed_at, one run clock);
* `bytes_per_peer_face_per_version`: the bytes a peer sends on its face per version, by BCube
  level (one level, "0", for ring and ina), the mean over peers — what went onto its links
  over the run (the forwarders' traces: Data and Interests) per version — beside the
  `analytic` value (the values of every part its schedule has it send, once: each peer
  reports it in its start record; no packet headers) and their ratio;
  `data_bytes_sent_per_peer_per_version`: the Data its app sent (steady versions), duplicate
  answers to re-expressed Interests included;
* `max_link_bytes_per_version`: the busiest direction of a link between two forwarders (the
  forwarders' rate traces; the apps' faces are sockets, not links) over the run, per version.
"""
from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import fabric
from .feature import Feature, Launch, Rows
from .metrics import read_metrics
from .topology import router_names
from .traces import link_bytes
from .values import ScenarioError, fmt

if TYPE_CHECKING:
    from ndnps.protocol.config import TrainingSpec

    from .config import Scenario
    from .nodes import AppNode

_SWITCH = re.compile(r"^s(\d+)-\d+$")      # a BCube switch, s<level>-<index>
WARMUP_VERSIONS = 2         # as report.WARMUP_VERSIONS: the first versions carry start-up


def _levels(n: int, peers: int) -> int:
    k = 0
    while n ** k < peers:
        k += 1
    return k


def face_bytes(link_bytes: dict[str, int], senders: list[str], bcube: bool,
               by_level: bool = True) -> dict[str, list[int]]:
    """Each peer's bytes sent on its faces over the run: a BCube host's links to its switches
    (s<L>-…; by level L, or all as "0" when not `by_level`), or everything its host (or its
    own face) sent."""
    out: dict[str, list[int]] = {}
    for sender in senders:
        mine: dict[str, int] = {}
        for label, n in link_bytes.items():
            a, _, b = label.partition("->")
            if a != sender:
                continue
            if bcube:                       # its uplinks only (not its app's face)
                m = _SWITCH.match(b)
                if m is None:
                    continue
                level = m.group(1) if by_level else "0"
            else:
                level = "0"
            mine[level] = mine.get(level, 0) + n
        for level, n in mine.items():
            out.setdefault(level, []).append(n)
    return out


def busiest_link(link_bytes: dict[str, int], apps: list[str]) -> int:
    """The most bytes one direction of a link between two forwarders carried (an app's face
    to its forwarder is a socket, not a link)."""
    return max((n for label, n in link_bytes.items()
                if not set(label.split("->")) & set(apps)), default=0)


def collective_summary(run_dir: Path, job: Any, versions: int, link_bytes: dict[str, int],
                       senders: list[str], bcube: bool = False) -> dict[str, Any]:
    """`senders`: the name each peer's traffic leaves under in the link counts (its own, its
    netns host's h-<peer>, its BCube host's p<i>); `bcube`: a BCube fabric's links by level."""
    by_peer: dict[str, dict[int, dict]] = {}
    analytics: list[dict[str, float]] = []     # each peer's, from the schedule it ran
    reformed: dict[int, dict] = {}
    for p in job.who.workers:
        path = run_dir / "metrics" / f"{p}.jsonl"
        recs = read_metrics(path) if path.exists() else []
        by_peer[p] = {r["version"]: r for r in recs if "digest" in r}
        start = next((r for r in recs if r.get("event") == "start"), {})
        for r in recs:                  # a re-formed collective, as each survivor saw it
            if r.get("event") == "reformed":
                reformed.setdefault(r["epoch"], {k: r.get(k) for k in
                                                 ("epoch", "peers", "lost", "version", "t")})
        if "analytic_bytes_by_level" in start:
            analytics.append(start["analytic_bytes_by_level"])
    for r in reformed.values():     # the survivors redid from r["version"] on, without the lost
        for p in r.get("lost") or ():
            by_peer[p] = {v: rec for v, rec in by_peer.get(p, {}).items() if v <= r["version"]}
    made = sorted({v for recs in by_peer.values() for v in recs})
    mismatches = [v for v in made
                  if len({recs[v]["digest"] for recs in by_peer.values() if v in recs}) > 1]
    # a peer lost mid-run (killed; the others stopped, or re-formed without it) made fewer:
    # each version is compared, and timed, among the peers that made it
    compared = [v for v in made if sum(v in recs for recs in by_peer.values()) >= 2]
    steady = [v for v in compared if v > WARMUP_VERSIONS] or compared
    syncs = [max(recs[v]["ready_at"] for recs in by_peer.values() if v in recs)
             - max(recs[v]["computed_at"] for recs in by_peer.values() if v in recs)
             for v in steady]
    levels = sorted({lvl for recs in by_peer.values() for r in recs.values()
                     for lvl in r.get("sent_by_level", {})}, key=int)
    data_sent = {}                  # what the apps sent (duplicate answers included)
    for lvl in levels:
        xs = [recs[v].get("sent_by_level", {}).get(lvl, 0) for recs in by_peer.values()
              for v in steady if v in recs]
        data_sent[lvl] = statistics.mean(xs) if xs else 0.0
    # what went onto the peers' links (Interests included), per version of the run
    # a ring's or an aggregator's traffic on a BCube: every uplink, one figure
    on_links = face_bytes(link_bytes, senders, bcube, by_level=job.peers.collective == "bcube")
    measured = {lvl: statistics.mean(xs) / versions for lvl, xs in sorted(on_links.items())
                if versions} or data_sent
    analytic = {lvl: statistics.mean(a.get(lvl, 0.0) for a in analytics)
                for lvl in sorted({lvl for a in analytics for lvl in a}, key=int)}
    busiest = busiest_link(link_bytes, [*job.who.workers, job.who.ps])
    return {
        "kind": job.peers.collective,
        "peers": len(job.who.workers),
        **({"bcube": {"n": job.peers.bcube_n,
                      "k": _levels(job.peers.bcube_n, len(job.who.workers))}}
           if job.peers.collective == "bcube" else {}),
        "versions_compared": len(compared),
        "reformed": [reformed[e] for e in sorted(reformed)],
        "parameters_identical": not mismatches,
        "digest_mismatches": mismatches[:20],
        "sync_seconds": statistics.median(syncs) if syncs else None,
        "bytes_per_peer_face_per_version": measured,
        "data_bytes_sent_per_peer_per_version": data_sent,
        "analytic_bytes_per_peer_face_per_version": analytic,
        "bytes_over_analytic": {lvl: measured[lvl] / analytic[lvl] for lvl in measured
                                if analytic.get(lvl)},
        "max_link_bytes_per_version": busiest / versions if versions and busiest else None,
    }


# ---- the scenario -------------------------------------------------------------------------------

def peer_defaults(training: dict[str, Any], sc: "Scenario") -> None:
    """A PS-less job's defaults from the topology: a BCube fabric's n; on a star, the
    forwarder every peer shares aggregates (collective = "ina")."""
    if training.get("collective") == "bcube" and sc.topology == "bcube":
        training.setdefault("bcube_n", sc.n)
    if training.get("collective") == "ina" and sc.topology in ("star", "bcube"):
        # the forwarder every peer shares; on a BCube the first host's (docs/collectives.md)
        training.setdefault("aggregate_at", "fwd" if sc.topology == "star" else "p0")


def check_peers(sc: "Scenario", doc: dict[str, Any]) -> None:
    """What a PS-less training (training.collective) cannot do."""
    for t in sc.all_jobs:
        if t.peers.collective:
            _check_peer_job(sc, doc, t)


def _check_peer_job(sc: "Scenario", doc: dict[str, Any], t: "TrainingSpec") -> None:
    if sc.jobs and t.peers.collective == "bcube":
        raise ScenarioError("jobs: a BCube's peers fill the fabric: one job")
    if sc.system != "ndnps":
        raise ScenarioError("run.system: the TCP baseline trains with a PS, not "
                            "training.collective")
    if sc.topology == "bottleneck":
        raise ScenarioError("topology.kind: the bottleneck has one host for every worker; "
                            "PS-less training needs a host per peer (star, tree, bcube)")
    if t.peers.collective == "bcube" and sc.topology == "bcube" and \
            (t.peers.bcube_n, t.bcube_levels()) != (sc.n, sc.k):
        raise ScenarioError(f"training.bcube_n: the peers form BCube({t.peers.bcube_n}, "
                            f"{t.bcube_levels()}), the topology is BCube({sc.n}, {sc.k})")
    if t.peers.collective == "ina" and t.aggregation.aggregate_at not in router_names(sc):
        raise ScenarioError(f"training.aggregate_at: {t.aggregation.aggregate_at!r} is not one "
                            f"of the topology's forwarders ({', '.join(router_names(sc))})")
    if "ina" in doc:
        raise ScenarioError("ina: places aggregators for a PS; PS-less training with "
                            "collective = \"ina\" aggregates at training.aggregate_at")
    if sc.slowdown:
        raise ScenarioError("workers.slowdown: not with PS-less training (peers run in step)")


def senders(sc: "Scenario") -> list[str]:
    """The name each peer's traffic leaves under in the link counts: its own, its netns host's
    h-<peer>, its BCube host's p<i>."""
    if sc.topology == "bcube":           # each peer's host forwarder
        return [a.forwarder for a in fabric.bcube_apps(sc, fabric.network(sc, 1000.0))]
    peers = sc.training.who.workers
    return [f"h-{p}" for p in peers] if sc.netns else list(peers)


def over_analytic(by_level: dict[str, float]) -> str:
    """Bytes on a peer's face over the analytic value: one figure, or one per BCube level."""
    if len(by_level) == 1:
        return fmt(next(iter(by_level.values())), ".2f")
    return ", ".join(f"level {lvl}: {fmt(v, '.2f')}" for lvl, v in by_level.items()) or "-"


class Collective(Feature):
    """PS-less training: peers all-reduce their gradients (ring, BCube, or at an aggregating
    forwarder), with no PS."""
    name = "collective"

    def active(self, sc: "Scenario") -> bool:
        return bool(sc.training.peers.collective) and sc.pipeline is None

    def training(self, doc: dict[str, Any], sc: "Scenario",
                 table: dict[str, Any]) -> dict[str, Any]:
        if table.get("collective"):
            peer_defaults(table, sc)
        return table

    def parse(self, doc: dict[str, Any], sc: "Scenario") -> None:
        if any(job.peers.collective for job in sc.all_jobs):
            check_peers(sc, doc)

    def program(self, sc: "Scenario", run_dir: Path, app: "AppNode") -> Launch | None:
        # by the app's own job: in a [[jobs]] run the first training may be a PS's
        if app.role != "peer" or not sc.job_of(app.name).peers.collective:
            return None
        return Launch("peer", ["ndnps.apps.peer"])

    def loss_policy(self, job: "TrainingSpec", name: str, role: str) -> str | None:
        if role != "peer":
            return None
        wait = f"once it is silent for training.worker_timeout = {job.liveness.worker_timeout:g} s"
        if job.peers.on_peer_loss == "re-form":
            return (f"the other peers re-form without it {wait} (training.on_peer_loss = "
                    f"'re-form')")
        return f"the training stops {wait} (training.on_peer_loss = 'stop')"

    def summarize(self, run_dir: Path, sc: "Scenario", summary: dict[str, Any],
                  wall_seconds: float) -> None:
        summary.update(collective_summary(run_dir, sc.training, summary["versions"],
                                          link_bytes(run_dir), senders(sc),
                                          sc.topology == "bcube"))
        summary["collective"] = summary.pop("kind")

    def rows(self, summary: dict[str, Any], rows: Rows) -> Rows:
        """What a PS-less run promises: the same parameters at every peer, the bytes its
        schedule sends, the time from the last gradient to the last peer's parameters."""
        bcube = summary.get("bcube")
        shape = f", BCube({bcube['n']}, {bcube['k']})" if bcube else ""
        out: Rows = [
            ("scenario", summary["scenario"]),
            ("collective", f"{summary.get('collective')}, {summary.get('peers')} peers{shape}"),
            ("final accuracy", summary["final_accuracy"]), ("versions", summary["versions"]),
            ("model bytes", summary["model_bytes"]),
            ("parameters identical (versions compared)",
             f"{summary.get('parameters_identical')} ({summary.get('versions_compared')})"),
            ("bytes on a peer's face per version / analytic",
             over_analytic(summary.get("bytes_over_analytic") or {})),
            ("sync (median, s)", summary.get("sync_seconds")),
            ("iteration (median, s)", summary["iteration_seconds"]),
            ("busiest link bytes per version", summary.get("max_link_bytes_per_version")),
            ("retransmissions", summary["retransmissions"])]
        if summary.get("faults") or summary.get("reformed"):
            out += [("faults injected", len([f for f in summary.get("faults", [])
                                             if "skipped" not in f])),
                    ("collective re-formed", len(summary.get("reformed") or []))]
        return out + [("wall seconds", summary["wall_seconds"])]
