"""The ``[training]`` table's parts, one per concern: who trains (`Identity`), what (`Model`),
the optimizer and its schedule (`Sgd`), the PS's update rule (`Update`), the fetches'
transport (`Transport`), the PS's pushes (`Push`) and the workers' probing for what a push
lost (`Probe`), liveness (`Liveness`), the PS's task offers (`Tasks`), the workers'
registration (`Registration`), the PS's checkpoint (`Checkpointing`), in-network aggregation
(`Aggregation`), a job's side of ``[share]`` (`Sharing`), PS-less training (`Collective`),
pipeline training (`Stages`) and emulated devices (`Device`).

Each part checks its own settings when made (ndnps.protocol.part); what spans parts (an
aggregating job needs sync mode and a key...) is checked by the whole table,
ndnps.protocol.config.TrainingSpec, and each program reads the parts that are its own
(ndnps.protocol.config: PsConfig, PeerConfig, StageConfig). Every setting keeps its key of
``[training]`` (``training.window``) and its flag (``--window``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .part import Part, setting


@dataclass(frozen=True)
class Identity(Part):
    """Who trains: the PS's and the training's names, the workers (a PS-less job's peers, a
    pipeline's stage apps) and the training's key."""
    ps: str = setting("ps", "PS name, one name component: the PS registers /<ps>")
    train: str = setting("t1", "training name, one name component")
    workers: tuple[str, ...] = setting(["w1", "w2", "w3"],
                                       "candidate workers (names), in worker-index order")
    min_workers: int = setting(1, "fewest workers that must accept (else the PS fails)", low=1)
    key: str = setting("", "HMAC-SHA256 key of this training (empty: DigestSha256 only)")

    def check(self) -> None:
        for key in ("ps", "train"):
            self.check_id(key, getattr(self, key))
        if not self.workers:
            self.fail("workers", "need at least one worker")
        for i, w in enumerate(self.workers):
            self.check_id(f"workers[{i}]", w)
        if len(set(self.workers)) != len(self.workers):
            self.fail("workers", "duplicate worker name")
        if self.min_workers > len(self.workers):
            self.fail("min_workers", f"{self.min_workers} > {len(self.workers)} candidate "
                                     "workers")

    @property
    def key_bytes(self) -> bytes | None:
        return self.key.encode() if self.key else None


@dataclass(frozen=True)
class Model(Part):
    """What is trained: the dataset, the model and the seed of everything drawn."""
    dataset: str = setting("digits", "dataset", choices=("digits", "synthetic"))
    n_samples: int = setting(0, "synthetic: samples (0 = dataset default)", low=0)
    n_features: int = setting(0, "synthetic: features (0 = dataset default)", low=0)
    n_classes: int = setting(0, "synthetic: classes (0 = dataset default)", low=0)
    model: str = setting("mlp", "model", choices=("mlp", "softmax"))
    hidden: tuple[int, ...] = setting([64], "MLP hidden layer sizes")
    seed: int = setting(0, "seed of data split, shards, batches and initial parameters", low=0)

    def check(self) -> None:
        if self.model == "mlp" and (not self.hidden or any(h < 1 for h in self.hidden)):
            self.fail("hidden", f"need positive layer sizes, got {list(self.hidden)}")
        if self.dataset != "synthetic":
            for key in ("n_samples", "n_features", "n_classes"):
                if getattr(self, key):
                    self.fail(key, "applies to dataset = \"synthetic\" only")

    @property
    def layers(self) -> int:
        """The model's dense layers."""
        return len(self.hidden) + 1 if self.model == "mlp" else 1

    def dataset_kwargs(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("n_samples", "n_features", "n_classes")
                if getattr(self, k)}

    def model_spec(self) -> dict[str, Any]:
        return {"kind": self.model, **({"hidden": list(self.hidden)} if self.model == "mlp"
                                       else {})}


@dataclass(frozen=True)
class Sgd(Part):
    """The optimizer and how long it runs: every program that steps the model reads it."""
    batch: int = setting(32, "minibatch per worker", low=1)
    lr: float = setting(0.1, "learning rate", low=0, strict_low=True)
    momentum: float = setting(0.9, "SGD momentum", low=0, high=1)
    weight_decay: float = setting(0.0, "L2 weight decay", low=0)
    epochs: int = setting(20, "epochs over each worker's shard", low=1)
    max_versions: int = setting(0, "stop after this many versions (0 = epochs decide)", low=0)
    target_accuracy: float = setting(0.0, "stop once test accuracy reaches this (0 = off)",
                                     low=0, high=1)
    eval_every: int = setting(1, "PS evaluates test accuracy every this many versions", low=1)


@dataclass(frozen=True)
class Update(Part):
    """The PS's update rule (ndnps.exchanges.ps.update)."""
    mode: str = setting("sync", "sync or async SGD", choices=("sync", "async"))
    max_staleness: int = setting(8, "async: drop gradients computed this many versions back "
                                 "or more (staleness > max_staleness is dropped)", low=0)


@dataclass(frozen=True)
class Transport(Part):
    """How segments are fetched (every fetcher of the job: the PS's, a worker's, a peer's,
    a stage's; the PS sends its workers theirs in the training content)."""
    segment_timeout: float = setting(1.0, "initial retransmission timeout of a segment "
                                     "Interest", low=0, strict_low=True)
    max_tries: int = setting(8, "tries per segment before a fetch fails", low=1)
    window: int = setting(16, "most segment Interests in flight towards one producer: the cap "
                          "of the fetches' congestion window (from initial_window, growing per "
                          "Data, halved at most once per round trip on a CongestionMark or a "
                          "loss; ndnps.exchanges.transport.window)", low=1)
    initial_window: int = setting(2, "a new congestion window's size (segment Interests "
                                  "towards a producer not heard from yet); at most `window`",
                                  low=1)
    retx_suppression_ms: int = setting(
        1, "the forwarders' retransmission suppression interval for this training (NFD's "
        "best-route parameter retx-suppression-initial, ms; doubling per retransmission): the "
        "scenario runner sets it on every forwarder, and a fetch re-asks no sooner", low=1)
    retx_suppression_max_ms: int = setting(
        2, "the most the suppression interval doubles to (NFD's retx-suppression-max, "
        "250 ms by default there): set on every forwarder by the runner; a fetch's early "
        "retries are spaced by it at most, a few round trips on a LAN", low=1)
    collect_lifetime: float = setting(2.0, "longest lifetime of a (held) collect Interest: the "
                                      "first lives until shortly after the expected finish, "
                                      "re-expressions double up to this", low=0,
                                      strict_low=True)

    def check(self) -> None:
        if self.retx_suppression_ms > self.retx_suppression_max_ms:
            self.fail("retx_suppression_ms", "must be <= retx_suppression_max_ms")


@dataclass(frozen=True)
class Push(Part):
    """How the PS sends each version: along the persistent PIT or per worker, paced, and the
    versions it keeps for probes."""
    push_mode: str = setting("persistent", "persistent (pushes along the persistent PIT) or "
                             "unicast (baseline: each worker fetches each version)",
                             choices=("persistent", "unicast"))
    push_rate_mbps: float = setting(0.0, "pace the first push at this rate (0 = just under "
                                    "the rate the workers fetched their content at, or "
                                    "unlimited when too little to tell); with push_rate = "
                                    "\"fixed\", every push (then 0 = only socket "
                                    "back-pressure)", low=0)
    push_rate: str = setting("adaptive", "adaptive: the push rate follows the marks and "
                             "losses the workers report on each version's push "
                             "(ndnps.exchanges.transport.push_rate); fixed: push_rate_mbps",
                             choices=("adaptive", "fixed"))
    push_rate_floor_mbps: float = setting(1.0, "the adaptive push rate never goes below this",
                                          low=0, strict_low=True)
    push_rate_ceiling_mbps: float = setting(0.0, "nor above this (0 = no ceiling)", low=0)
    push_burst: int = setting(16, "segments pushed between yields to the event loop", low=1)
    keep_versions: int = setting(4, "parameter versions the PS keeps to answer probes", low=1)


@dataclass(frozen=True)
class Probe(Part):
    """How a worker fetches what a push lost (the PS sends these in the training content)."""
    probe_initial: float = setting(1.0, "probe timer before any history", low=0,
                                   strict_low=True)
    probe_k: float = setting(4.0, "probe timer = mean + k * deviation", low=0)
    probe_min: float = setting(0.2, "probe timer lower bound", low=0, strict_low=True)
    probe_max: float = setting(8.0, "probe timer upper bound (backoff stops there)", low=0,
                               strict_low=True)
    gap_delay: float = setting(0.002, "wait this long after a gap in a push before fetching "
                               "the hole", low=0)
    tail_delay: float = setting(0.5, "a push quiet for 8 gaps between its segments, 2 round "
                                "trips, or 1.5 x the longest pause the last pushes went on "
                                "after, whichever is longest, but this long at most, short of "
                                "its FinalBlockId: fetch the rest", low=0, strict_low=True)

    def check(self) -> None:
        if self.probe_min > self.probe_max:
            self.fail("probe_min", "must be <= probe_max")


@dataclass(frozen=True)
class Liveness(Part):
    """When a silent worker (peer, stage) is taken as lost, and how long a done app stays for
    the others' late Interests."""
    worker_timeout: float = setting(30.0, "a worker silent this long is dropped", low=0,
                                    strict_low=True)
    linger: float = setting(10.0, "PS stays at most this long after the final push, until "
                            "every worker has left, for late probes (keep it above "
                            "probe_max)", low=0)


@dataclass(frozen=True)
class Tasks(Part):
    """The PS's task offers: to every candidate at the start, and again to a lost worker."""
    task_timeout: float = setting(0.05, "lifetime of the first task-assignment Interest "
                                  "(doubling per expiry to 16 times that until a round trip "
                                  "is measured, then a few round trips)", low=0,
                                  strict_low=True)
    # at 20 % loss on every link a task exchange (four lossy hops) fails 59 % of tries: 5 tries
    # lost a worker 7 % of the time, 10 (of 1 s) 0.5 % — 2 % of 4-worker runs, seen in a full
    # bench run.  A worker answers at once, so 20 tries leave 3e-5
    task_tries: int = setting(20, "task-assignment tries per worker", low=1)
    on_worker_loss: str = setting("continue", "sync: when a worker is lost (silent for "
                                  "worker_timeout), 'continue' with the others (versions with "
                                  "fewer gradients are counted) or 'wait' until it rejoins and "
                                  "collect its gradient again (fails after rejoin_timeout)",
                                  choices=("continue", "wait"))
    rejoin_interval: float = setting(2.0, "the PS re-offers the task to a lost worker this "
                                     "often", low=0, strict_low=True)
    rejoin_timeout: float = setting(120.0, "the PS stops re-offering the task to a lost worker "
                                    "after this long (0 = never re-offer)", low=0)


@dataclass(frozen=True)
class Registration(Part):
    """A worker's registration with its PS, and its patience with a silent PS (the PS sends
    these in the training content)."""
    register_interval: float = setting(10.0, "workers refresh their *insert* this often",
                                       low=0, strict_low=True)
    register_timeout: float = setting(0.5, "wait this long for the registration "
                                      "confirmation", low=0, strict_low=True)
    register_tries: int = setting(20, "registration tries before a worker gives up (and "
                                  "ps_timeout at least)", low=1)
    ps_timeout: float = setting(60.0, "a worker that hears nothing from its PS this long gives "
                                "up", low=0, strict_low=True)


@dataclass(frozen=True)
class Checkpointing(Part):
    """The PS's checkpoint, which a restarted PS resumes from."""
    checkpoint: str = setting("", "PS checkpoint file (.npz): parameters, optimizer state "
                              "and version (async: each worker's step), written atomically "
                              "every checkpoint_every versions; a PS started with an existing "
                              "one resumes from it (empty: off)")
    checkpoint_every: int = setting(10, "write the checkpoint every this many versions", low=1)


@dataclass(frozen=True)
class Aggregation(Part):
    """In-network aggregation (docs/aggregation.md): where the gradients are summed."""
    aggregate_at: str = setting("", "in-network aggregation: the node name of the PS's edge "
                                "forwarder, configured to aggregate this training (management "
                                "aggregators/add); the PS asks it for the sum of each "
                                "gradient segment instead of every worker's (sync mode; needs "
                                "key). Empty: off")
    aggregate_via: tuple[str, ...] = setting([], "with aggregate_at: aggregators below the "
                                             "edge and the workers whose gradients each sums "
                                             "first, as \"<node>:<worker>+<worker>...\" "
                                             "(python -m ndnps.placement's plan); workers not "
                                             "listed are summed at the edge")
    aggregate_window: int = setting(128, "with aggregate_at: most segment sums in flight from "
                                    "the PS (the cap of the sums' congestion window, from "
                                    "initial_window). A sum's round trip waits for every "
                                    "member's segment, so `window` (16) sums carried 4 MB in "
                                    "~1 s at 1 Gbit/s; as SwitchML sizes its pool of slots in "
                                    "flight, keep it under the aggregators' slots", low=1)

    def check(self) -> None:
        if self.aggregate_at:
            self.check_id("aggregate_at", self.aggregate_at)
            self.groups()
        elif self.aggregate_via:
            self.fail("aggregate_via", "needs aggregate_at")

    def groups(self) -> dict[str, list[str]]:
        """aggregate_via as {aggregator: its workers} (ConfigError naming the entry); that
        each is one of the training's workers is the whole table's check."""
        plan: dict[str, list[str]] = {}
        seen: set[str] = set()
        for i, entry in enumerate(self.aggregate_via):
            node, sep, members = entry.partition(":")
            key = f"aggregate_via[{i}]"
            if not sep or not members:
                self.fail(key, f"expected \"<node>:<worker>+...\", got {entry!r}")
            self.check_id(key, node)
            if len(node.encode()) > 64:
                self.fail(key, "node names have at most 64 octets")
            if node in plan or node == self.aggregate_at:
                self.fail(key, f"node {node!r} given twice")
            plan[node] = members.split("+")
            for w in plan[node]:
                if w in seen:
                    self.fail(key, f"worker {w!r} in two groups")
                seen.add(w)
        return plan


@dataclass(frozen=True)
class Sharing(Part):
    """A job's side of several jobs sharing aggregators in turns (docs/sharing.md): the
    controller its nodes ask before each round."""
    share_controller: str = setting("", "with aggregate_at: the share controller's node name "
                                    "(python -m ndnps.apps.controller): before each round the job's "
                                    "nodes ask it whether the round uses the aggregators; a "
                                    "round that does not runs the ordinary way at once (the "
                                    "PS sums; peers: ring). Empty: every round uses them")
    share_patience: float = setting(5.0, "share_controller: s without its answer before a "
                                    "round goes the ordinary way (the controller is taken as "
                                    "unreachable)", low=0, strict_low=True)

    def check(self) -> None:
        if self.share_controller:
            self.check_id("share_controller", self.share_controller)


@dataclass(frozen=True)
class Collective(Part):
    """PS-less training (docs/collectives.md): how the peers combine their gradients."""
    collective: str = setting("", "PS-less training: the peers (`workers`, python -m "
                              "ndnps.apps.peer) combine their gradients by \"ring\" all-reduce, "
                              "\"ina\" (every peer asks aggregate_at for the sums) or "
                              "\"bcube\" (BCube(bcube_n, k) level by level). Empty: a PS "
                              "trains", choices=("", "ring", "ina", "bcube"))
    bcube_n: int = setting(2, "collective = \"bcube\": the switches' ports n (the peers are "
                           "n^k)", low=2)
    on_peer_loss: str = setting("stop", "collective: when a peer is silent for "
                                "worker_timeout, 'stop' the training (every peer exits 3) or "
                                "'re-form' the collective with the peers that answer a roll "
                                "call, from the version the furthest behind of them is at "
                                "(ring and ina; a BCube stops: its shape breaks)",
                                choices=("stop", "re-form"))

    def bcube_levels(self, peers: int) -> int:
        """collective = "bcube": k, the levels of BCube(bcube_n, k) the `peers` fill."""
        n, k = self.bcube_n, 0
        while n ** k < peers:
            k += 1
        if n ** k != peers or k < 1:
            self.fail("workers", f"BCube(n={n}, k) needs n^k peers, got {peers}")
        return k


@dataclass(frozen=True)
class Stages(Part):
    """Pipeline + data parallel training on devices of different speeds (docs/hetero.md):
    the machines, each stage's device kind and layers, the micro-batches."""
    machines: int = setting(0, "pipeline training: the virtual machines m, each running one "
                            "stage app (python -m ndnps.apps.stage) per device kind, named "
                            "m<j>-<kind> (`workers`, machine by machine, each in stage "
                            "order); the same stage of every machine is synchronised by ring "
                            "all-reduce (collective = \"ring\"). 0: not a pipeline", low=0)
    stage_kinds: tuple[str, ...] = setting([], "pipeline: each stage's device kind, "
                                           "\"name:speed\", in stage order (the planner's)")
    stage_layers: tuple[int, ...] = setting([], "pipeline: how many of the model's layers "
                                            "each stage holds, in stage order")
    micro_batches: int = setting(4, "pipeline: micro-batches per mini-batch (k)", low=1)
    recompute: bool = setting(False, "pipeline: a stage drops a micro-batch's activations "
                              "after its forward and recomputes them before its backward "
                              "(memory for time)")
    device_scale: float = setting(1.0, "pipeline: the fastest device kind is this many times "
                                  "slower than one core of this machine (the rest of a "
                                  "device's time is waited out: ndnps.ml.device)", low=1)

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
                self.fail(f"stage_kinds[{i}]", f"expected \"name:speed\" (speed > 0), got "
                                               f"{entry!r}")
            self.check_id(f"stage_kinds[{i}]", name)
            out.append((name, value))
        if not out or len({n for n, _ in out}) != len(out):
            self.fail("stage_kinds", f"one distinct kind per stage, got {list(self.stage_kinds)}")
        return out

    def stage_apps(self) -> list[list[str]]:
        """machines > 0: the stage apps of each machine, in stage order."""
        kinds = [k for k, _ in self.stage_devices()]
        return [[f"m{j + 1}-{k}" for k in kinds] for j in range(self.machines)]


@dataclass(frozen=True)
class Device(Part):
    """Emulated devices: an accelerator's step time, and how a slowed device's time is
    taken (measured, or from a profile of this machine)."""
    device_ms: float = setting(0.0, "an accelerator's time per step, emulated: each gradient "
                               "waits this long before it is computed, the CPU free meanwhile "
                               "(as a GPU kernel leaves it); jobs of different step times on "
                               "one machine (several jobs sharing aggregators). 0: none", low=0)
    device_time: str = setting("measured", "an emulated device (a pipeline's stages, a "
                               "worker's --slowdown) takes its factor x the work's CPU time as "
                               "it ran (measured) or x the work's cost in a profile of this "
                               "machine (profiled: layer_seconds; ndnps.ml.device says why)",
                               choices=("measured", "profiled"))
    layer_seconds: tuple[float, ...] = setting([], "device_time = \"profiled\": each layer's "
                                               "forward and backward CPU seconds per sample on "
                                               "this machine (forward, backward, layer by "
                                               "layer); empty: the scenario runner profiles "
                                               "the model before the run")

    def step_cost(self, first: int, last: int, backward: bool) -> float:
        """device_time = "profiled": layers first..last's forward (or backward) cost per
        sample on this machine's core (layer_seconds). ConfigError: no profile given."""
        if not self.layer_seconds:
            self.fail("layer_seconds", "empty with device_time = \"profiled\" (the scenario "
                                       "runner fills it from a profile of the model)")
        return sum(self.layer_seconds[2 * l + backward] for l in range(first, last + 1))
