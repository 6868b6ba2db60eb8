"""The forwarders' traces of a run (TSV, ndnSIM L3RateTracer shape) and their final status: the
bytes of every link and direction."""
from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from pathlib import Path

def read_tsv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def trace_stems(run_dir: Path, kind: str) -> list[str]:
    """The forwarder processes with a `kind` trace: `<node>`, and `<node>-r<k>` for the k-th
    process of a node restarted since (the runner keeps their traces so)."""
    return sorted(p.name[:-len(f"-{kind}.tsv")]
                  for p in (run_dir / "traces").glob(f"*-{kind}.tsv"))


def node_of(stem: str) -> str:
    return re.sub(r"-r\d+$", "", stem)


# the exchanges of every version (ndnps.protocol.names.classify), not of start-up and
# teardown (task, content, insert, remove) nor of recoveries (probe, nack)
TRAINING_CLASSES = frozenset({"collect", "distribute", "params", "partial", "roll", "aggregate",
                              "activation", "backward"})


def link_directions(run_dir: Path, classes: frozenset[str] | None = None
                    ) -> dict[tuple[str, str], int]:
    """Bytes over the run per (sender, receiver) of every link, both directions, from the
    forwarders' rate traces: what a forwarder sent on a face (Out rows) and, on faces to apps,
    what the app sent it (In rows). A link between two forwarders is counted by its sender
    (Out rows: what went onto the link, before losses), not again by the receiver. `classes`:
    only those packet classes (e.g. TRAINING_CLASSES)."""
    forwarders = {node_of(s) for s in trace_stems(run_dir, "rates")}
    out: dict[tuple[str, str], int] = defaultdict(int)
    for stem in trace_stems(run_dir, "rates"):
        labels = face_labels(run_dir / "traces" / f"{stem}-status.json")
        for row in read_tsv(run_dir / "traces" / f"{stem}-rates.tsv"):
            if row["Class"] == "mgmt" or (classes is not None and row["Class"] not in classes):
                continue                                 # (mgmt: our own monitoring)
            peer = labels.get(row["FaceId"], f"face{row['FaceId']}")
            if row["Type"].startswith("Out"):
                out[(stem, peer)] += int(row["Bytes"])
            elif peer not in forwarders:
                out[(peer, stem)] += int(row["Bytes"])
    return dict(out)


def link_bytes(run_dir: Path, classes: frozenset[str] | None = None) -> dict[str, int]:
    """Bytes over the run per link and direction, labelled sender->receiver (`classes`: of
    those packet classes only)."""
    return {f"{a}->{b}": n for (a, b), n in sorted(link_directions(run_dir, classes).items())}


def face_labels(status_path: Path) -> dict[str, str]:
    """Face id -> the peer forwarder or app behind it (faces gone by the end keep `faceN`)."""
    if not status_path.exists():
        return {}
    return json.loads(status_path.read_text()).get("labels", {})
