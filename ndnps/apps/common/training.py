"""What the programs that run a training share — the PS and its parts (ps/), a PS-less peer
(peer/) and a pipeline stage (stage/): the exception that ends a training, the training's length,
the fetcher a training's config makes, and the PS's counters (their names are the metrics
records' fields: the scenario runner, bench/ and the tests read them)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ndnps.client.fetcher import MIN_RTO, FetchStats, SegmentFetcher, reorder_floor
from ndnps.ml.train import steps_per_epoch
from ndnps.ndn.rto import RtoEstimator
from ndnps.protocol.parts import Sgd, Transport


class JobFailed(Exception):
    """The training cannot go on (the message says why)."""


def total_steps(sgd: Sgd, n_train: int, workers: int) -> int:
    """Steps (sync: versions) per worker: epochs over the shard, capped by max_versions."""
    spe = steps_per_epoch(n_train, workers, sgd.batch)
    if spe < 1:
        raise JobFailed(f"{n_train} samples over {workers} workers give no full batch of "
                        f"{sgd.batch}")
    total = sgd.epochs * spe
    return min(total, sgd.max_versions) if sgd.max_versions else total


def training_fetcher(transport: Transport, app: Any, validator: Any, stats: FetchStats,
                     patience: float) -> SegmentFetcher:
    """A fetcher with the training's window, RTO, tries and retransmission suppression;
    `patience`: how long a silent producer is waited for."""
    t = transport
    return SegmentFetcher(
        app.express_future, validator, t.window,
        RtoEstimator(t.segment_timeout, min_rto=MIN_RTO, max_rto=4 * t.segment_timeout),
        t.max_tries, stats, reorder_floor=reorder_floor(app),
        suppression=t.retx_suppression_ms / 1000,
        suppression_max=t.retx_suppression_max_ms / 1000,
        patience=patience, initial_window=t.initial_window)


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
    segments_aggregated: int = 0    # gradient segments whose sum the network made
    segments_fallback: int = 0      # ... that the PS summed itself instead
    segments_ordinary: int = 0      # ... summed here: the share controller said so
