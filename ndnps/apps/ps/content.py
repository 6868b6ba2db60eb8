"""The PS's training content (protocol step 3, docs/design.md): /<ps>/<train>/<gpu>/<seg> holds the
spec, the hyper-parameters, the worker's place (index, shard) and the current parameters and
version, signed segments made per worker; a worker not taken is answered a refusal under that name.

``Content`` owns the segments made, the Interests held until they are (during the assignment,
or while a lost worker's new content is not made yet), and the refusals' reasons.  It reads
the training it describes through ``Training`` (the ParameterServer: its configuration, model
and progress), and reports a rejoining worker's complete fetch to `on_fetched` (the roster).
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

from ndnps.client.pending import HeldInterests
from ndnps.client.segments import sign_segments
from ndnps.exchanges.ps.membership import Member, Membership, State
from ndnps.ml.train import steps_per_epoch
from ndnps.protocol import messages, names
from ndnps.protocol.codec import flatten
from ndnps.protocol.config import PsConfig

# the worker-side settings the PS sends (the wire's keys, in this order), from its parts:
# transport, probe, registration, aggregation, device
CONTENT_KNOBS = ("window", "initial_window", "retx_suppression_ms", "retx_suppression_max_ms",
                 "segment_timeout",
                 "max_tries", "probe_initial", "probe_k", "probe_min", "probe_max", "gap_delay",
                 "tail_delay", "register_interval", "register_timeout", "register_tries",
                 "collect_lifetime", "ps_timeout", "aggregate_at", "aggregate_via", "device_ms",
                 "device_time", "layer_seconds")


def knobs(cfg: PsConfig) -> dict[str, Any]:
    """The training content's `knobs`: the worker-side settings, by key (CONTENT_KNOBS)."""
    table = {**cfg.transport.as_table(), **cfg.probe.as_table(),
             **cfg.registration.as_table(), **cfg.aggregation.as_table(),
             **cfg.device.as_table()}
    return {k: table[k] for k in CONTENT_KNOBS}


class Training(Protocol):
    """What the content reads of the PS."""
    cfg: PsConfig
    spec: dict[str, Any]
    pspec: Any
    dataset: Any
    model: Any
    version: int
    restarts: int

    @property
    def total_steps(self) -> int: ...


class Content:
    def __init__(self, training: Training, membership: Membership, signer: Any,
                 on_fetched: Callable[[Member], None]) -> None:
        self.training, self.membership, self.signer = training, membership, signer
        self.on_fetched = on_fetched
        self.held: HeldInterests[tuple[str, int]] = HeldInterests()     # gpu, segment
        self.contents: dict[str, list[bytes]] = {}
        self.refused: dict[str, str] = {}           # workers not taken, and why

    def make(self, w: Member, vec: np.ndarray | None = None) -> None:
        """Worker w's training content: the current parameters (`vec`, flattened) and version
        (a worker that rejoins starts there), signed segments; Interests held meanwhile are
        answered."""
        t = self.training
        cfg = t.cfg
        if vec is None:
            vec = flatten(t.model.params)
        n = len(self.membership.members)
        info = {
            "ps": cfg.who.ps, "train": cfg.who.train, "workers": n, "mode": cfg.update.mode,
            "push_mode": cfg.push.push_mode, "model_spec": t.spec,
            "param_spec": [[k, list(s)] for k, s in t.pspec], "dataset": cfg.model.dataset,
            "dataset_kwargs": cfg.model.dataset_kwargs(), "seed": cfg.model.seed,
            "batch": cfg.sgd.batch,
            "steps_per_epoch": steps_per_epoch(len(t.dataset.X_train), n, cfg.sgd.batch),
            "total_steps": t.total_steps,
            "hyper": {"lr": cfg.sgd.lr, "momentum": cfg.sgd.momentum,
                      "weight_decay": cfg.sgd.weight_decay,
                      "max_staleness": cfg.update.max_staleness},
            "knobs": knobs(cfg),
            "version": t.version,
            "step": w.steps_done,               # async: the step it computes next
            "restarts": t.restarts,             # a worker rolls back only for a new PS
            "gpu": w.gpu, "index": w.index}
        wires = self.contents[w.gpu] = sign_segments(
            messages.content_blob(vec, info),
            lambda s: names.content(cfg.who.ps, cfg.who.train, w.gpu, s), self.signer)
        for key in [k for k in self.held.keys() if k[0] == w.gpu]:
            if key[1] < len(wires) and self.held.release(key, wires[key[1]]):
                self.served(w, key[1])

    def forget(self, gpu: str) -> None:
        """`gpu` is lost: its content is stale (a restarted worker gets the current version)."""
        self.contents.pop(gpu, None)

    def refusal(self, gpu: str) -> list[bytes]:
        """A worker not taken is answered this under its content name (signed, one
        segment)."""
        cfg = self.training.cfg
        return sign_segments(messages.refusal_blob(self.refused[gpu]),
                             lambda s: names.content(cfg.who.ps, cfg.who.train, gpu, s),
                             self.signer)

    def release_refused(self) -> None:
        """The assignment is over: the refused workers' content Interests held meanwhile are
        answered their refusal."""
        for gpu in self.refused:
            for key in [k for k in self.held.keys() if k[0] == gpu]:
                self.held.release(key, self.refusal(gpu)[0])

    def served(self, w: Member, seg: int) -> None:
        if w.state is State.REJOINING and seg == len(self.contents[w.gpu]) - 1:
            self.on_fetched(w)          # a restarted worker has its content: it is back

    def serve(self, c: names.Content, reply, ctx) -> None:
        if c.gpu in self.refused and c.gpu not in self.contents:
            reply(self.refusal(c.gpu)[0])
            return
        m = self.membership
        w = m.get(c.gpu)
        wires = self.contents.get(c.gpu)
        if wires is None:
            # held while the assignment is running, or while a lost worker's new content (the
            # current version) is not made yet
            if c.gpu in self.training.cfg.who.workers and (
                    not m.members or (w is not None and m.may_come_back(w))):
                self.held.hold((c.gpu, c.segment), reply, ctx["deadline"])
            return
        if c.segment < len(wires):
            reply(wires[c.segment])
            if w is not None:
                self.served(w, c.segment)
