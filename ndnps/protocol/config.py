"""The parameters of one training: a dataclass loaded from the ``[training]`` table of a TOML file
(the scenario file) and/or command-line flags (flags win), validated with errors that name the
offending key (``training.lr: must be > 0, got -1``).

Every field is a flag of ``python -m apps.ps`` (``--min-workers 3``); lists are comma-separated
(``--workers w1,w2,w3``, ``--hidden 64,32``).  The PS sends the worker-side knobs (probe timer,
window, refresh interval...) in the training content, so workers need only ``key``.
"""
from __future__ import annotations

import argparse
import math
import tomllib
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from . import names


class ConfigError(ValueError):
    """A bad training parameter; the message starts with the key (``training.<key>: ...``)."""


def _f(default, help: str, *, choices: tuple | None = None, low: float | None = None,
       high: float | None = None, strict_low: bool = False):
    meta = {"help": help, "choices": choices, "low": low, "high": high, "strict_low": strict_low}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class TrainingConfig:
    # who
    ps: str = _f("ps", "PS name, one name component: the PS registers /<ps>")
    train: str = _f("t1", "training name, one name component")
    workers: list[str] = _f(["w1", "w2", "w3"], "candidate workers (names), in worker-index order")
    min_workers: int = _f(1, "fewest workers that must accept (else the PS fails)", low=1)
    # how
    mode: str = _f("sync", "sync or async SGD", choices=("sync", "async"))
    push_mode: str = _f("persistent", "persistent (pushes along the persistent PIT) or unicast "
                        "(baseline: each worker fetches each version)",
                        choices=("persistent", "unicast"))
    # what
    dataset: str = _f("digits", "dataset", choices=("digits", "synthetic"))
    n_samples: int = _f(0, "synthetic: samples (0 = dataset default)", low=0)
    n_features: int = _f(0, "synthetic: features (0 = dataset default)", low=0)
    n_classes: int = _f(0, "synthetic: classes (0 = dataset default)", low=0)
    model: str = _f("mlp", "model", choices=("mlp", "softmax"))
    hidden: list[int] = _f([64], "MLP hidden layer sizes")
    seed: int = _f(0, "seed of data split, shards, batches and initial parameters", low=0)
    batch: int = _f(32, "minibatch per worker", low=1)
    lr: float = _f(0.1, "learning rate", low=0, strict_low=True)
    momentum: float = _f(0.9, "SGD momentum", low=0, high=1)
    weight_decay: float = _f(0.0, "L2 weight decay", low=0)
    epochs: int = _f(20, "epochs over each worker's shard", low=1)
    max_versions: int = _f(0, "stop after this many versions (0 = epochs decide)", low=0)
    target_accuracy: float = _f(0.0, "stop once test accuracy reaches this (0 = off)", low=0, high=1)
    max_staleness: int = _f(8, "async: drop gradients computed this many versions back or more "
                            "(staleness > max_staleness is dropped)", low=0)
    # security
    key: str = _f("", "HMAC-SHA256 key of this training (empty: DigestSha256 only)")
    # timing and limits (seconds unless stated)
    task_timeout: float = _f(0.05, "lifetime of the first task-assignment Interest (doubling "
                             "per expiry to 16 times that until a round trip is measured, then "
                             "a few round trips)", low=0, strict_low=True)
    # at 20 % loss on every link a task exchange (four lossy hops) fails 59 % of tries: 5 tries
    # lost a worker 7 % of the time, 10 (of 1 s) 0.5 % — 2 % of 4-worker runs, seen in a full
    # bench run.  A worker answers at once, so 20 tries leave 3e-5
    task_tries: int = _f(20, "task-assignment tries per worker", low=1)
    worker_timeout: float = _f(30.0, "a worker silent this long is dropped", low=0, strict_low=True)
    on_worker_loss: str = _f("continue", "sync: when a worker is lost (silent for worker_timeout), "
                             "'continue' with the others (versions with fewer gradients are "
                             "counted) or 'wait' until it rejoins and collect its gradient "
                             "again (fails after rejoin_timeout)", choices=("continue", "wait"))
    rejoin_interval: float = _f(2.0, "the PS re-offers the task to a lost worker this often",
                                low=0, strict_low=True)
    rejoin_timeout: float = _f(120.0, "the PS stops re-offering the task to a lost worker after "
                               "this long (0 = never re-offer)", low=0)
    collect_lifetime: float = _f(2.0, "longest lifetime of a (held) collect Interest: the first "
                                 "lives until shortly after the expected finish, re-expressions "
                                 "double up to this", low=0, strict_low=True)
    register_interval: float = _f(10.0, "workers refresh their *insert* this often", low=0,
                                  strict_low=True)
    register_timeout: float = _f(0.5, "wait this long for the registration confirmation", low=0,
                                 strict_low=True)
    register_tries: int = _f(20, "registration tries before a worker gives up (and ps_timeout "
                             "at least)", low=1)
    segment_timeout: float = _f(1.0, "initial retransmission timeout of a segment Interest", low=0,
                                strict_low=True)
    max_tries: int = _f(8, "tries per segment before a fetch fails", low=1)
    window: int = _f(16, "most segment Interests in flight towards one producer: the cap of "
                     "the fetches' congestion window (from initial_window, growing per Data, "
                     "halved at most once per round trip on a CongestionMark or a loss; "
                     "ndnps.exchanges.window)", low=1)
    initial_window: int = _f(2, "a new congestion window's size (segment Interests towards a "
                             "producer not heard from yet); at most `window`", low=1)
    retx_suppression_ms: int = _f(
        1, "the forwarders' retransmission suppression interval for this training (NFD's "
        "best-route parameter retx-suppression-initial, ms; doubling per retransmission): the "
        "scenario runner sets it on every forwarder, and a fetch re-asks no sooner", low=1)
    retx_suppression_max_ms: int = _f(
        2, "the most the suppression interval doubles to (NFD's retx-suppression-max, "
        "250 ms by default there): set on every forwarder by the runner; a fetch's early "
        "retries are spaced by it at most, a few round trips on a LAN", low=1)
    probe_initial: float = _f(1.0, "probe timer before any history", low=0, strict_low=True)
    probe_k: float = _f(4.0, "probe timer = mean + k * deviation", low=0)
    probe_min: float = _f(0.2, "probe timer lower bound", low=0, strict_low=True)
    probe_max: float = _f(8.0, "probe timer upper bound (backoff stops there)", low=0, strict_low=True)
    gap_delay: float = _f(0.002, "wait this long after a gap in a push before fetching the hole",
                          low=0)
    tail_delay: float = _f(0.5, "a push quiet for 8 gaps between its segments, 2 round "
                           "trips, or 1.5 x the longest pause the last pushes went on after, "
                           "whichever is longest, but this long at most, short of its "
                           "FinalBlockId: fetch the rest", low=0, strict_low=True)
    push_rate_mbps: float = _f(0.0, "pace the first push at this rate (0 = just under the "
                               "rate the workers fetched their content at, or unlimited when "
                               "too little to tell); with push_rate = \"fixed\", every push "
                               "(then 0 = only socket back-pressure)", low=0)
    push_rate: str = _f("adaptive", "adaptive: the push rate follows the marks and losses the "
                        "workers report on each version's push (ndnps.exchanges.push_rate); "
                        "fixed: push_rate_mbps", choices=("adaptive", "fixed"))
    push_rate_floor_mbps: float = _f(1.0, "the adaptive push rate never goes below this",
                                     low=0, strict_low=True)
    push_rate_ceiling_mbps: float = _f(0.0, "nor above this (0 = no ceiling)", low=0)
    push_burst: int = _f(16, "segments pushed between yields to the event loop", low=1)
    keep_versions: int = _f(4, "parameter versions the PS keeps to answer probes", low=1)
    eval_every: int = _f(1, "PS evaluates test accuracy every this many versions", low=1)
    linger: float = _f(10.0, "PS stays at most this long after the final push, until every "
                       "worker has left, for late probes (keep it above probe_max)", low=0)
    checkpoint: str = _f("", "PS checkpoint file (.npz): parameters, optimizer state and "
                         "version (async: each worker's step), written atomically every "
                         "checkpoint_every versions; a PS started with an existing one resumes "
                         "from it (empty: off)")
    checkpoint_every: int = _f(10, "write the checkpoint every this many versions", low=1)
    ps_timeout: float = _f(60.0, "a worker that hears nothing from its PS this long gives up",
                           low=0, strict_low=True)
    # in-network aggregation (docs/aggregation.md)
    aggregate_at: str = _f("", "in-network aggregation: the node name of the PS's edge "
                           "forwarder, configured to aggregate this training (management "
                           "aggregators/add); the PS asks it for the sum of each gradient "
                           "segment instead of every worker's (sync mode; needs key). Empty: off")
    aggregate_via: list[str] = _f([], "with aggregate_at: aggregators below the edge and the "
                                  "workers whose gradients each sums first, as "
                                  "\"<node>:<worker>+<worker>...\" (python -m ndnps.placement's "
                                  "plan); workers not listed are summed at the edge")
    aggregate_window: int = _f(128, "with aggregate_at: most segment sums in flight from the "
                               "PS (the cap of the sums' congestion window, from "
                               "initial_window). A sum's round trip waits for every member's "
                               "segment, so `window` (16) sums carried 4 MB in ~1 s at 1 "
                               "Gbit/s; as SwitchML sizes its pool of slots in flight, keep it "
                               "under the aggregators' slots", low=1)
    device_ms: float = _f(0.0, "an accelerator's time per step, emulated: each gradient waits "
                          "this long before it is computed, the CPU free meanwhile (as a GPU "
                          "kernel leaves it); jobs of different step times on one machine "
                          "(several jobs sharing aggregators). 0: none", low=0)
    # several jobs sharing aggregators in turns (docs/sharing.md)
    share_controller: str = _f("", "with aggregate_at: the share controller's node name "
                               "(python -m apps.controller): before each round the job's "
                               "nodes ask it whether the round uses the aggregators; a round "
                               "that does not runs the ordinary way at once (the PS sums; "
                               "peers: ring). Empty: every round uses them")
    share_patience: float = _f(5.0, "share_controller: s without its answer before a round "
                               "goes the ordinary way (the controller is taken as "
                               "unreachable)", low=0, strict_low=True)
    # PS-less training (docs/collectives.md)
    collective: str = _f("", "PS-less training: the peers (`workers`, python -m apps.peer) "
                         "combine their gradients by \"ring\" all-reduce, \"ina\" (every "
                         "peer asks aggregate_at for the sums) or \"bcube\" (BCube(bcube_n, k) "
                         "level by level). Empty: a PS trains",
                         choices=("", "ring", "ina", "bcube"))
    bcube_n: int = _f(2, "collective = \"bcube\": the switches' ports n (the peers are n^k)",
                      low=2)
    on_peer_loss: str = _f("stop", "collective: when a peer is silent for worker_timeout, "
                           "'stop' the training (every peer exits 3) or 're-form' the "
                           "collective with the peers that answer a roll call, from the "
                           "version the furthest behind of them is at (ring and ina; a BCube "
                           "stops: its shape breaks)", choices=("stop", "re-form"))

    # pipeline + data parallel on devices of different speeds (docs/hetero.md)
    machines: int = _f(0, "pipeline training: the virtual machines m, each running one stage "
                       "app (python -m apps.stage) per device kind, named m<j>-<kind> "
                       "(`workers`, machine by machine, each in stage order); the same stage "
                       "of every machine is synchronised by ring all-reduce (collective = "
                       "\"ring\"). 0: not a pipeline", low=0)
    stage_kinds: list[str] = _f([], "pipeline: each stage's device kind, \"name:speed\", in "
                                "stage order (the planner's)")
    stage_layers: list[int] = _f([], "pipeline: how many of the model's layers each stage "
                                 "holds, in stage order")
    micro_batches: int = _f(4, "pipeline: micro-batches per mini-batch (k)", low=1)
    recompute: bool = _f(False, "pipeline: a stage drops a micro-batch's activations after its "
                         "forward and recomputes them before its backward (memory for time)")
    device_scale: float = _f(1.0, "pipeline: the fastest device kind is this many times slower "
                             "than one core of this machine (the rest of a device's time is "
                             "waited out: ndnps.ml.device)", low=1)
    device_time: str = _f("measured", "an emulated device (a pipeline's stages, a worker's "
                          "--slowdown) takes its factor x the work's CPU time as it ran "
                          "(measured) or x the work's cost in a profile of this machine "
                          "(profiled: layer_seconds; ndnps.ml.device says why)",
                          choices=("measured", "profiled"))
    layer_seconds: list[float] = _f([], "device_time = \"profiled\": each layer's forward and "
                                    "backward CPU seconds per sample on this machine (forward, "
                                    "backward, layer by layer); empty: the scenario runner "
                                    "profiles the model before the run")

    # ---- derived -----------------------------------------------------------------------------

    def validate(self) -> "TrainingConfig":
        for f in fields(self):
            value = getattr(self, f.name)
            _check(f.name, value, f.type, f.metadata)
        for key in ("ps", "train"):
            _check_id(key, getattr(self, key))
        if not self.workers:
            raise ConfigError("training.workers: need at least one worker")
        for i, w in enumerate(self.workers):
            _check_id(f"workers[{i}]", w)
        if len(set(self.workers)) != len(self.workers):
            raise ConfigError("training.workers: duplicate worker name")
        if self.min_workers > len(self.workers):
            raise ConfigError(f"training.min_workers: {self.min_workers} > "
                              f"{len(self.workers)} candidate workers")
        if self.model == "mlp" and (not self.hidden or any(h < 1 for h in self.hidden)):
            raise ConfigError(f"training.hidden: need positive layer sizes, got {self.hidden}")
        if self.probe_min > self.probe_max:
            raise ConfigError("training.probe_min: must be <= probe_max")
        if self.retx_suppression_ms > self.retx_suppression_max_ms:
            raise ConfigError("training.retx_suppression_ms: must be <= retx_suppression_max_ms")
        if self.aggregate_at:
            self.aggregation_plan()             # raises ConfigError naming the key
        elif self.aggregate_via:
            raise ConfigError("training.aggregate_via: needs aggregate_at")
        if self.collective:
            self._check_collective()
        if self.share_controller:
            _check_id("share_controller", self.share_controller)
            if not self.aggregate_at:
                raise ConfigError("training.share_controller: shares aggregators: needs "
                                  "aggregate_at")
            if self.on_peer_loss == "re-form" and self.collective:
                raise ConfigError("training.share_controller: not with on_peer_loss = "
                                  "\"re-form\" (the controller knows the job's first peers; "
                                  "not built)")
            if self.collective not in ("", "ina"):
                raise ConfigError("training.share_controller: for a PS's job or collective "
                                  "= \"ina\" (a ring or BCube uses no aggregator)")
        if self.machines:
            self._check_pipeline()
        if self.layer_seconds and (len(self.layer_seconds) != 2 * self.layers
                                   or any(c < 0 for c in self.layer_seconds)):
            raise ConfigError(f"training.layer_seconds: a forward and a backward cost >= 0 for "
                              f"each of the model's {self.layers} layers, got "
                              f"{len(self.layer_seconds)} values")
        if self.dataset != "synthetic":
            for key in ("n_samples", "n_features", "n_classes"):
                if getattr(self, key):
                    raise ConfigError(f"training.{key}: applies to dataset = \"synthetic\" only")
        return self

    def aggregation_plan(self) -> dict[str, list[str]]:
        """aggregate_via as {aggregator: its workers}, checked against the training."""
        _check_id("aggregate_at", self.aggregate_at)
        if self.mode != "sync":
            raise ConfigError("training.aggregate_at: in-network aggregation needs mode = "
                              "\"sync\" (async applies each gradient on its own)")
        if not self.key:
            raise ConfigError("training.aggregate_at: in-network aggregation needs key (the "
                              "aggregators check each contribution's HMAC)")
        plan: dict[str, list[str]] = {}
        seen: set[str] = set()
        for i, entry in enumerate(self.aggregate_via):
            node, sep, members = entry.partition(":")
            key = f"aggregate_via[{i}]"
            if not sep or not members:
                raise ConfigError(f"training.{key}: expected \"<node>:<worker>+...\", "
                                  f"got {entry!r}")
            _check_id(key, node)
            if len(node.encode()) > 64:
                raise ConfigError(f"training.{key}: node names have at most 64 octets")
            if node in plan or node == self.aggregate_at:
                raise ConfigError(f"training.{key}: node {node!r} given twice")
            plan[node] = members.split("+")
            for w in plan[node]:
                if w not in self.workers:
                    raise ConfigError(f"training.{key}: {w!r} is not one of the workers")
                if w in seen:
                    raise ConfigError(f"training.{key}: worker {w!r} in two groups")
                seen.add(w)
        return plan

    def _check_collective(self) -> None:
        if self.mode != "sync":
            raise ConfigError("training.collective: PS-less training is sync (mode = \"sync\")")
        if self.collective == "ina" and not self.aggregate_at:
            raise ConfigError("training.collective: \"ina\" needs aggregate_at (the forwarder "
                              "that sums)")
        if self.collective == "bcube":
            self.bcube_levels()
            if self.on_peer_loss == "re-form":
                raise ConfigError("training.on_peer_loss: a BCube cannot re-form without a "
                                  "peer (its shape breaks): \"stop\"")

    def _check_pipeline(self) -> None:
        if self.collective != "ring" or self.mode != "sync" or self.model != "mlp":
            raise ConfigError("training.machines: a pipeline trains an mlp in sync mode, its "
                              "stages synchronised by collective = \"ring\"")
        kinds = self.stage_devices()
        if len(self.stage_layers) != len(kinds) or any(n < 1 for n in self.stage_layers):
            raise ConfigError(f"training.stage_layers: one count >= 1 per stage "
                              f"({len(kinds)}), got {self.stage_layers}")
        if sum(self.stage_layers) != len(self.hidden) + 1:
            raise ConfigError(f"training.stage_layers: {self.stage_layers} hold "
                              f"{sum(self.stage_layers)} layers, the mlp has "
                              f"{len(self.hidden) + 1}")
        if self.workers != [a for m in self.stage_apps() for a in m]:
            raise ConfigError("training.workers: a pipeline's apps are m<j>-<kind>, machine by "
                              "machine in stage order: "
                              + ", ".join(a for m in self.stage_apps() for a in m))
        if self.batch < self.micro_batches:
            raise ConfigError(f"training.micro_batches: {self.micro_batches} micro-batches of a "
                              f"mini-batch of {self.batch}")
        if self.target_accuracy:
            raise ConfigError("training.target_accuracy: not with a pipeline (no stage holds "
                              "the whole model: it is evaluated at the end)")
        if self.on_peer_loss != "stop":
            raise ConfigError("training.on_peer_loss: a pipeline stops when a stage is lost")

    @property
    def layers(self) -> int:
        """The model's dense layers."""
        return len(self.hidden) + 1 if self.model == "mlp" else 1

    def step_cost(self, first: int, last: int, backward: bool) -> float:
        """device_time = "profiled": layers first..last's forward (or backward) cost per
        sample on this machine's core (layer_seconds). ConfigError: no profile given."""
        if not self.layer_seconds:
            raise ConfigError("training.layer_seconds: empty with device_time = \"profiled\" "
                              "(the scenario runner fills it from a profile of the model)")
        return sum(self.layer_seconds[2 * l + backward] for l in range(first, last + 1))

    def stage_devices(self) -> list[tuple[str, float]]:
        """machines > 0: (kind, speed) of each stage, in stage order."""
        out = []
        for i, entry in enumerate(self.stage_kinds):
            name, sep, speed = entry.partition(":")
            try:
                value = float(speed)
            except ValueError:
                value = 0.0
            if not sep or value <= 0:
                raise ConfigError(f"training.stage_kinds[{i}]: expected \"name:speed\" "
                                  f"(speed > 0), got {entry!r}")
            _check_id(f"stage_kinds[{i}]", name)
            out.append((name, value))
        if not out or len({n for n, _ in out}) != len(out):
            raise ConfigError(f"training.stage_kinds: one distinct kind per stage, got "
                              f"{self.stage_kinds}")
        return out

    def stage_apps(self) -> list[list[str]]:
        """machines > 0: the stage apps of each machine, in stage order."""
        kinds = [k for k, _ in self.stage_devices()]
        return [[f"m{j + 1}-{k}" for k in kinds] for j in range(self.machines)]

    def bcube_levels(self) -> int:
        """collective = "bcube": k, the levels of BCube(bcube_n, k) the peers fill."""
        n, peers, k = self.bcube_n, len(self.workers), 0
        while n ** k < peers:
            k += 1
        if n ** k != peers or k < 1:
            raise ConfigError(f"training.workers: BCube(n={n}, k) needs n^k peers, got {peers}")
        return k

    @property
    def recorder(self) -> str:
        """The app whose metrics carry the job's version records: the PS, or without one
        (collective) the first peer, or a pipeline's stage that computes the loss."""
        if self.machines:               # a pipeline: the first machine's last stage
            return self.workers[len(self.stage_layers) - 1]
        return self.workers[0] if self.collective else self.ps

    @property
    def nodes(self) -> list[str]:
        """The apps that decide a job's rounds (a share controller's nodes): its peers, or its
        PS."""
        return list(self.workers) if self.collective else [self.ps]

    @property
    def key_bytes(self) -> bytes | None:
        return self.key.encode() if self.key else None

    def dataset_kwargs(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("n_samples", "n_features", "n_classes")
                if getattr(self, k)}

    def model_spec(self) -> dict[str, Any]:
        return {"kind": self.model, **({"hidden": list(self.hidden)} if self.model == "mlp" else {})}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _type_name(t) -> str:
    return {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
            "list[str]": "a list of strings", "list[int]": "a list of integers",
            "list[float]": "a list of numbers"}[str(t)]


def _check_id(key: str, value: str) -> None:
    try:
        names.check_id(value, key)
    except names.BadName as e:
        raise ConfigError(f"training.{key}: {e}") from None


def _check(key: str, value: Any, typ, meta) -> None:
    t = str(typ)
    ok = {
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "list[str]": isinstance(value, list) and all(isinstance(v, str) for v in value),
        "list[int]": isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                                     for v in value),
        "list[float]": isinstance(value, list) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value),
    }[t]
    if not ok:
        raise ConfigError(f"training.{key}: expected {_type_name(t)}, got {value!r}")
    # nan and inf (TOML's and float()'s) would slip past every bound below
    if not all(map(math.isfinite, value if t == "list[float]" else
                   [value] if t == "float" else [])):
        what = "finite numbers" if t == "list[float]" else "a finite number"
        raise ConfigError(f"training.{key}: expected {what}, got {value!r}")
    if meta.get("choices") and value not in meta["choices"]:
        raise ConfigError(f"training.{key}: must be one of {', '.join(meta['choices'])}, got {value!r}")
    low, high = meta.get("low"), meta.get("high")
    if low is not None and (value < low or (meta.get("strict_low") and value == low)):
        raise ConfigError(f"training.{key}: must be {'>' if meta.get('strict_low') else '>='} "
                          f"{low}, got {value!r}")
    if high is not None and value > high:
        raise ConfigError(f"training.{key}: must be <= {high}, got {value!r}")


def _coerce(key: str, value: Any, typ) -> Any:
    """TOML ints are fine where floats are expected."""
    if str(typ) == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if str(typ) == "list[float]" and isinstance(value, list):
        return [float(v) if isinstance(v, int) and not isinstance(v, bool) else v
                for v in value]
    return value


def from_table(table: dict[str, Any]) -> TrainingConfig:
    """A validated config from a ``[training]`` table; unknown keys are errors."""
    if not isinstance(table, dict):
        raise ConfigError("training: expected a table")
    known = {f.name: f for f in fields(TrainingConfig)}
    for key in table:
        if key not in known:
            raise ConfigError(f"training.{key}: unknown key (known: {', '.join(sorted(known))})")
    values = {k: _coerce(k, v, known[k].type) for k, v in table.items()}
    cfg = TrainingConfig()
    for k, v in values.items():
        setattr(cfg, k, v)
    return cfg.validate()


def read_table(path: str | Path) -> dict[str, Any]:
    """The ``[training]`` table of a TOML file (empty if it has none)."""
    try:
        doc = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        why = f"cannot read {path}: {e.strerror}" if isinstance(e, OSError) else f"{path}: {e}"
        raise ConfigError(why) from None
    return doc.get("training", {})


# ---- command line ----------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser, only: tuple[str, ...] | None = None) -> None:
    """One flag per field (or per field in `only`), default None: unset flags leave the TOML
    value (or the dataclass default) alone."""
    group = parser.add_argument_group("training parameters (override the [training] table)")
    for f in fields(TrainingConfig):
        if only is not None and f.name not in only:
            continue
        factory = f.default_factory
        default = f.default if f.default is not MISSING else \
            factory() if callable(factory) else None
        t = str(f.type)
        shown = ",".join(map(str, default)) if isinstance(default, list) else default
        kw: dict[str, Any] = {"default": None, "dest": f.name,
                              "help": f"{f.metadata['help']} (default: {shown!r})"}
        if f.metadata.get("choices"):
            kw["choices"] = f.metadata["choices"]
        if t == "int":
            kw["type"], kw["metavar"] = int, "N"
        elif t == "float":
            kw["type"], kw["metavar"] = float, "X"
        elif t == "bool":
            kw["type"], kw["metavar"] = _bool, "true|false"
        elif t == "list[str]":
            kw["type"], kw["metavar"] = _str_list, "A,B,..."
        elif t == "list[int]":
            kw["type"], kw["metavar"] = _int_list, "N,N,..."
        elif t == "list[float]":
            kw["type"], kw["metavar"] = _float_list, "X,X,..."
        else:
            kw["metavar"] = "TEXT" if not f.metadata.get("choices") else None
        group.add_argument("--" + f.name.replace("_", "-"), **kw)


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _str_list(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def _int_list(text: str) -> list[int]:
    try:
        return [int(p) for p in _str_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _float_list(text: str) -> list[float]:
    try:
        return [float(p) for p in _str_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def load(config_path: str | Path | None, args: argparse.Namespace | None = None) -> TrainingConfig:
    """TOML ``[training]`` (if a file is given) overridden by the flags that were set."""
    table = dict(read_table(config_path)) if config_path else {}
    if args is not None:
        for f in fields(TrainingConfig):
            value = getattr(args, f.name, None)
            if value is not None:
                table[f.name] = value
    return from_table(table)


def load_member(config_path: str | Path, name: str) -> TrainingConfig:
    """`load`, for a process that is one of the training's workers (a peer, a stage)."""
    cfg = load(config_path)
    if name not in cfg.workers:
        raise ConfigError(f"--name: {name!r} is not one of training.workers")
    return cfg
