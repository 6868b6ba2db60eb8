"""The forwarders' status during and after a run: which face is which app (learnt while the
apps are connected) and each forwarder's final status, faces labelled, for the report."""
from __future__ import annotations

import json
from pathlib import Path

from ndnps.forwarder.status import fetch_status

from .nodes import Plan


def learn_face_labels(sockets: dict[str, str], face_labels: dict[tuple[str, int], str],
                      apps_seen: set[str]) -> None:
    """Apps' faces are known by the prefix they registered (/<ps>, /<gpu>): remember it
    while they are connected, since the final status comes after they left."""
    for name, sock in sockets.items():
        try:
            status = fetch_status(f"unix://{sock}", timeout=1.0, tries=2)
        except (OSError, ConnectionError, ValueError):
            continue
        app_faces = {f["id"] for f in status["faces"] if f["remote"].startswith("fd://")}
        for entry in status["fib"]:
            for hop in entry["nexthops"]:
                prefix = entry["prefix"].lstrip("/")
                if prefix and not prefix.startswith("localhost"):
                    face_labels.setdefault((name, hop["face"]), prefix)
                    if hop["face"] in app_faces:    # not a route toward another forwarder
                        apps_seen.add(prefix)


def collect_status(plan: Plan, sockets: dict[str, str],
                   face_labels: dict[tuple[str, int], str], run_dir: Path) -> list[str]:
    """Each forwarder's final status into traces/<name>-status.json, with faces labelled by
    peer or app; the notes of the ones unavailable."""
    notes = []
    peers = {}
    for name, node in plan.forwarders.items():
        for face in node.faces:
            peers[(name, face.uri.split("://", 1)[1])] = face.name
    for name, sock in sockets.items():
        try:
            # the runner's face has the apps' link conditions: a lost packet is asked again
            status = fetch_status(f"unix://{sock}", timeout=1.0, tries=5)
        except (OSError, ConnectionError, ValueError) as e:
            notes.append(f"status of {name} unavailable: {e}")
            continue
        labels = {str(face): label for (node, face), label in face_labels.items()
                  if node == name}
        for face in status["faces"]:
            peer = peers.get((name, face["remote"].split("://", 1)[-1]))
            if peer:
                labels[str(face["id"])] = peer
        status["labels"] = labels         # apps' faces included, though they are gone
        (run_dir / "traces" / f"{name}-status.json").write_text(json.dumps(status, indent=1))
    return notes
