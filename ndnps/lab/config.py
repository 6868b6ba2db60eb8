"""A scenario as parsed (ndnps.lab.spec reads it): the topology's and the links' values, the
run's limits, [faults]' kills and every job's training; each feature's own table (`ina`,
`share`, `pipeline`) is held as that feature's module parses it."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ndnps.protocol.config import TrainingSpec


@dataclass
class Links:
    loss: float = 0.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    rate_mbps: float = 0.0
    reliability: bool = False      # NDNLPv2 link reliability on every link (see above)
    # false: the apps' faces are plain local sockets (no conditions, no link reliability), the
    # forwarder-to-forwarder links alone are emulated — where NFD puts lossy links and NDNLPv2
    app_faces: bool = True
    # --netns with rate_mbps: the tbf queue of every veth end, bytes (0: [bottleneck]'s)
    queue_bytes: float = 0.0
    # --netns: every veth's MTU, and so the longest datagram of the forwarders' UDP faces
    mtu: int = 1500

    def as_table(self) -> dict[str, float]:
        """The link emulation, as the forwarder's face options take it."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in LINK_FLAGS + LINK_KERNEL and getattr(self, f.name)}


LINK_FLAGS = ("reliability", "app_faces")     # Links fields that are switches, not conditions
LINK_KERNEL = ("queue_bytes", "mtu")          # ... that only the kernel (qdisc, veth) takes
EVERY_LINK = LINK_FLAGS + ("mtu",)           # ... that both ends of every link need alike


@dataclass
class Bottleneck:
    """The one link of the bottleneck topology: a veth whose two ends are each limited by
    the kernel's tbf qdisc (`tc qdisc add dev X root tbf rate R burst B limit L`)."""
    rate_mbps: float = 100.0
    queue_bytes: int = 1 << 20     # tbf `limit`: bytes queued in the kernel, then dropped
    burst_bytes: int = 16384       # tbf `burst`: the token bucket's depth
    mtu: int = 1500                # the veth's MTU, both ends: links.mtu

    @property
    def rate_bytes_per_s(self) -> float:
        return self.rate_mbps * 1e6 / 8


@dataclass
class SimOptions:
    """[sim]: a simulated run's own knobs (docs/simulation.md)."""
    seed: int = 0                       # the links' losses
    # the workers send gradients of the model's size without computing them (a step's device
    # time is still the profiled cost when training.device_time = "profiled")
    synthetic_gradients: bool = False


@dataclass
class Scenario:
    name: str
    description: str = ""
    topology: str = "star"
    workers: int = 4
    leaves: int = 2
    # [topology] k: a fat-tree's arity (default 4), a BCube's levels (default 2); n: a BCube's
    # switch ports (ndnps.lab.fabric)
    k: int = 0
    n: int = 2
    # [topology] kind = "leaf-spine": its spines, and hosts under each of its `leaves`
    spines: int = 2
    hosts_per_leaf: int = 4
    links: Links = field(default_factory=Links)
    link_overrides: dict[tuple[str, str], Links] = field(default_factory=dict)
    forwarder: dict[str, Any] = field(default_factory=dict)
    slowdown: dict[str, float] = field(default_factory=dict)
    timeout: float = 300.0
    trace_interval: float = 0.5
    # a child that dies unasked: "continue" records it and lets the job's policy decide (a
    # forwarder, or a PS that checkpoints, restarted after restart_after, at most
    # max_restarts times each); "fail" fails the run at once
    on_child_exit: str = "continue"
    restart_after: float = 1.0
    max_restarts: int = 3
    netns: bool = False
    netem: bool = True
    bottleneck: Bottleneck = field(default_factory=Bottleneck)
    system: str = "ndnps"          # [run] system: what trains over the topology
    mode: str = "real"             # [run] mode: processes on sockets, or "sim" (ndnps.sim)
    sim: "SimOptions" = field(default_factory=lambda: SimOptions())
    training: TrainingSpec = field(default_factory=TrainingSpec)
    # every training of the run: [training] alone, or one per [[jobs]] entry (training is
    # then the first)
    jobs: list[TrainingSpec] = field(default_factory=list)
    kills: list["Kill"] = field(default_factory=list)    # [faults], by version
    ina: Any = None                # [ina]: in-network aggregation (ndnps.lab.ina.Ina), or None
    # [share]: jobs sharing an aggregator (ndnps.protocol.sharing.ShareConfig), or None
    share: Any = None
    # [[device_kinds]] and [pipeline]: pipeline + data parallel (ndnps.lab.pipeline_plan.Pipeline)
    pipeline: Any = None
    job_start: dict[str, float] = field(default_factory=dict)   # [[jobs]] start, by job (ps)
    # [topology] file (kind "minindn"): the file's network (ndnps.placement.network.Network),
    # the node every job's PS runs on, the nodes the workers take in turn
    network: Any = None
    ps_node: str = ""
    worker_nodes: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)    # the document as run

    @property
    def worker_names(self) -> list[str]:
        """Every job's workers, job by job."""
        return [w for job in self.all_jobs for w in job.who.workers]

    @property
    def all_jobs(self) -> list[TrainingSpec]:
        return self.jobs or [self.training]

    def replace_job(self, old: TrainingSpec, new: TrainingSpec) -> None:
        """`new` stands where `old` did (a job's spec is frozen: a changed job is a new
        one)."""
        self.jobs = [new if j is old else j for j in self.jobs]
        if self.training is old:
            self.training = new

    def job_of(self, app: str) -> TrainingSpec:
        """The job whose PS or worker `app` is."""
        return next(j for j in self.all_jobs if app == j.who.ps or app in j.who.workers)


@dataclass(frozen=True)
class Kill:
    """SIGKILL `worker` (role "worker"; or the PS, role "ps"; or forwarder `worker`, role
    "forwarder") once the PS's metrics show `at_version`; restart it (same name and argv)
    `restart_after` seconds later (None: never)."""
    worker: str
    at_version: int
    restart_after: float | None = None
    role: str = "worker"
