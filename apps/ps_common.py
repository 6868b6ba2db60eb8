"""What the parameter server's parts (apps/ps.py, roster, content, collect, loops) share: the
exception that ends a training, and the PS's counters (their names are the metrics records'
fields: the scenario runner, bench/ and the tests read them)."""
from __future__ import annotations

from dataclasses import dataclass


class JobFailed(Exception):
    """The training cannot go on (the message says why)."""


@dataclass
class PsCounters:
    registrations: int = 0
    removes: int = 0
    segments_pushed: int = 0
    gradients: int = 0
    malformed: int = 0
    mixed_objects: int = 0          # gradients made of two worker incarnations' segments
    stale_dropped: int = 0          # gradients the update rule did not apply (async)
    workers_dropped: int = 0
    workers_lost: int = 0           # dropped for silence (worker_timeout): may rejoin
    workers_rejoined: int = 0       # lost workers back (task accepted again)
    rejoin_offers: int = 0          # task Interests re-sent to lost workers
    short_versions: int = 0         # sync versions applied with fewer gradients than workers
    collects_redone: int = 0        # on_worker_loss = wait: gradients collected again
    checkpoints: int = 0            # checkpoint files written
    final_repushes: int = 0         # the final version pushed again while workers stayed
    segments_aggregated: int = 0    # gradient segments whose sum the network made (issue 24)
    segments_fallback: int = 0      # ... that the PS summed itself instead
