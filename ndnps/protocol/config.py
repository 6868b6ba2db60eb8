"""The parameters of one training, and each program's configuration.

The ``[training]`` table of a TOML file (the scenario file) and/or command-line flags (flags
win) make a `TrainingSpec`: the table's parts, one per concern (ndnps.protocol.parts), each
checking its own settings, and the checks that span parts — every error naming the key as the
user wrote it (``training.lr: must be > 0, got -1``; ``--lr / training.lr: ...`` for a flag).
Every setting is a flag of ``python -m ndnps.apps.ps`` (``--min-workers 3``); lists are
comma-separated (``--workers w1,w2,w3``, ``--hidden 64,32``).

Each program reads the parts that are its own: `PsConfig` (the PS: everything but the
collective and the pipeline; it sends the worker-side parts — transport, probe,
registration... — in the training content, so workers need only ``key``), `PeerConfig` (a
PS-less peer), `StageConfig` (a pipeline stage), `ControllerConfig` (the share controller:
``[share]``, ndnps.protocol.sharing, and its jobs' names and nodes).
"""
from __future__ import annotations

import argparse
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, NoReturn, Self, cast

from .part import ConfigError, Part
from .parts import (Aggregation, Checkpointing, Collective, Device, Identity, Liveness, Model,
                    Probe, Push, Registration, Sgd, Sharing, Stages, Tasks, Transport, Update)
from .sharing import CONTROLLED_POLICIES, ShareConfig, read_share

__all__ = ["ConfigError", "ControllerConfig", "PeerConfig", "PsConfig", "SharedJob",
           "StageConfig", "TrainingSpec", "add_arguments", "from_table", "load",
           "load_controller", "load_member", "read_table"]


@dataclass(frozen=True)
class TrainingSpec:
    """The whole ``[training]`` table: every part, and the checks across them. The lab holds
    one per job; a program takes its own config of it (`PsConfig.of`...)."""
    who: Identity = field(default_factory=Identity)
    model: Model = field(default_factory=Model)
    sgd: Sgd = field(default_factory=Sgd)
    update: Update = field(default_factory=Update)
    transport: Transport = field(default_factory=Transport)
    push: Push = field(default_factory=Push)
    probe: Probe = field(default_factory=Probe)
    liveness: Liveness = field(default_factory=Liveness)
    tasks: Tasks = field(default_factory=Tasks)
    registration: Registration = field(default_factory=Registration)
    checkpointing: Checkpointing = field(default_factory=Checkpointing)
    aggregation: Aggregation = field(default_factory=Aggregation)
    sharing: Sharing = field(default_factory=Sharing)
    peers: Collective = field(default_factory=Collective)
    stages: Stages = field(default_factory=Stages)
    device: Device = field(default_factory=Device)

    def __post_init__(self) -> None:
        self._check()

    # ---- the table -----------------------------------------------------------------------------

    @staticmethod
    def part_types() -> dict[str, type[Part]]:
        """Each part's attribute and type, in the table's order."""
        return {f.name: cast(type[Part], f.default_factory) for f in fields(TrainingSpec)}

    @classmethod
    def keys(cls) -> dict[str, str]:
        """Every key of [training], and the part (attribute) that holds it."""
        return {key: name for name, part in cls.part_types().items() for key in part.keys()}

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> Self:
        """A validated spec from a ``[training]`` table; unknown keys are errors."""
        if not isinstance(table, Mapping):
            raise ConfigError("training: expected a table")
        known = cls.keys()
        for key in table:
            if key not in known:
                raise ConfigError(f"training.{key}: unknown key (known: "
                                  f"{', '.join(sorted(known))})")
        parts: dict[str, Any] = {name: part.from_table(table)
                                 for name, part in cls.part_types().items()}
        return cls(**parts)

    def as_table(self) -> dict[str, Any]:
        """The ``[training]`` table (every key, as run)."""
        out: dict[str, Any] = {}
        for name in self.part_types():
            out.update(getattr(self, name).as_table())
        return out

    def with_values(self, **changes: Any) -> "TrainingSpec":
        """The same training with these keys changed (checked again, errors naming them)."""
        return from_table({**self.as_table(), **changes})

    # ---- the checks across parts -----------------------------------------------------------

    def _fail(self, key: str, why: str) -> NoReturn:
        raise ConfigError(f"training.{key}: {why}")

    def _check(self) -> None:
        who, agg = self.who, self.aggregation
        if agg.aggregate_at:
            if self.update.mode != "sync":
                self._fail("aggregate_at", "in-network aggregation needs mode = \"sync\" "
                                           "(async applies each gradient on its own)")
            if not who.key:
                self._fail("aggregate_at", "in-network aggregation needs key (the "
                                           "aggregators check each contribution's HMAC)")
            for i, entry in enumerate(agg.aggregate_via):
                for w in entry.partition(":")[2].split("+"):
                    if w not in who.workers:
                        self._fail(f"aggregate_via[{i}]", f"{w!r} is not one of the workers")
        collective = self.peers.collective
        if collective:
            if self.update.mode != "sync":
                self._fail("collective", "PS-less training is sync (mode = \"sync\")")
            if collective == "ina" and not agg.aggregate_at:
                self._fail("collective", "\"ina\" needs aggregate_at (the forwarder that "
                                         "sums)")
            if collective == "bcube":
                self.bcube_levels()
                if self.peers.on_peer_loss == "re-form":
                    self._fail("on_peer_loss", "a BCube cannot re-form without a peer (its "
                                               "shape breaks): \"stop\"")
        if self.sharing.share_controller:
            if not agg.aggregate_at:
                self._fail("share_controller", "shares aggregators: needs aggregate_at")
            if self.peers.on_peer_loss == "re-form" and collective:
                self._fail("share_controller", "not with on_peer_loss = \"re-form\" (the "
                                               "controller knows the job's first peers; not "
                                               "built)")
            if collective not in ("", "ina"):
                self._fail("share_controller", "for a PS's job or collective = \"ina\" (a "
                                               "ring or BCube uses no aggregator)")
        if self.stages.machines:
            self._check_pipeline()
        layer_seconds = self.device.layer_seconds
        if layer_seconds and (len(layer_seconds) != 2 * self.model.layers
                              or any(c < 0 for c in layer_seconds)):
            self._fail("layer_seconds", f"a forward and a backward cost >= 0 for each of the "
                                        f"model's {self.model.layers} layers, got "
                                        f"{len(layer_seconds)} values")

    def _check_pipeline(self) -> None:
        stages, model = self.stages, self.model
        if self.peers.collective != "ring" or self.update.mode != "sync" or \
                model.model != "mlp":
            self._fail("machines", "a pipeline trains an mlp in sync mode, its stages "
                                   "synchronised by collective = \"ring\"")
        kinds = stages.stage_devices()
        if len(stages.stage_layers) != len(kinds) or any(n < 1 for n in stages.stage_layers):
            self._fail("stage_layers", f"one count >= 1 per stage ({len(kinds)}), got "
                                       f"{list(stages.stage_layers)}")
        if sum(stages.stage_layers) != len(model.hidden) + 1:
            self._fail("stage_layers", f"{list(stages.stage_layers)} hold "
                                       f"{sum(stages.stage_layers)} layers, the mlp has "
                                       f"{len(model.hidden) + 1}")
        apps = [a for m in stages.stage_apps() for a in m]
        if list(self.who.workers) != apps:
            self._fail("workers", "a pipeline's apps are m<j>-<kind>, machine by machine in "
                                  "stage order: " + ", ".join(apps))
        if self.sgd.batch < stages.micro_batches:
            self._fail("micro_batches", f"{stages.micro_batches} micro-batches of a "
                                        f"mini-batch of {self.sgd.batch}")
        if self.sgd.target_accuracy:
            self._fail("target_accuracy", "not with a pipeline (no stage holds the whole "
                                          "model: it is evaluated at the end)")
        if self.peers.on_peer_loss != "stop":
            self._fail("on_peer_loss", "a pipeline stops when a stage is lost")

    # ---- derived -----------------------------------------------------------------------------

    def bcube_levels(self) -> int:
        """collective = "bcube": k, the levels of BCube(bcube_n, k) the peers fill."""
        return self.peers.bcube_levels(len(self.who.workers))

    @property
    def recorder(self) -> str:
        """The app whose metrics carry the job's version records: the PS, or without one
        (collective) the first peer, or a pipeline's stage that computes the loss."""
        if self.stages.machines:        # a pipeline: the first machine's last stage
            return self.who.workers[len(self.stages.stage_layers) - 1]
        return self.who.workers[0] if self.peers.collective else self.who.ps

    @property
    def nodes(self) -> list[str]:
        """The apps that decide a job's rounds (a share controller's nodes): its peers, or its
        PS."""
        return list(self.who.workers) if self.peers.collective else [self.who.ps]


# ---- each program's configuration ----------------------------------------------------------------

class _Of:
    """A program's config: the spec's parts it reads (its fields are the spec's names)."""

    @classmethod
    def of(cls, spec: TrainingSpec) -> Self:
        return cls(**{f.name: getattr(spec, f.name) for f in fields(cls)})  # type: ignore


@dataclass(frozen=True)
class PsConfig(_Of):
    """The parameter server's (ndnps.apps.ps): the job, the model and its optimizer, the update
    rule, its fetches, pushes, task offers and checkpoint, aggregation and sharing; and what
    it sends its workers in the training content (probe, registration, transport, device)."""
    who: Identity
    model: Model
    sgd: Sgd
    update: Update
    transport: Transport
    push: Push
    probe: Probe
    liveness: Liveness
    tasks: Tasks
    registration: Registration
    checkpointing: Checkpointing
    aggregation: Aggregation
    sharing: Sharing
    device: Device


@dataclass(frozen=True)
class PeerConfig(_Of):
    """A PS-less peer's (ndnps.apps.peer): the job, the model and its optimizer, its fetches,
    the collective (and the aggregator of "ina", shared or not), the emulated device."""
    who: Identity
    model: Model
    sgd: Sgd
    transport: Transport
    liveness: Liveness
    aggregation: Aggregation
    sharing: Sharing
    peers: Collective
    device: Device


@dataclass(frozen=True)
class StageConfig(_Of):
    """A pipeline stage's (ndnps.apps.stage): the job, the model and its optimizer, its fetches,
    the pipeline and the devices' time."""
    who: Identity
    model: Model
    sgd: Sgd
    transport: Transport
    liveness: Liveness
    stages: Stages
    device: Device


@dataclass(frozen=True)
class SharedJob:
    """A job as the share controller knows it: its names and key, and its nodes (its PS, or
    its peers) that ask for each round."""
    who: Identity
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class ControllerConfig:
    """The share controller's (ndnps.apps.controller): ``[share]`` and its jobs."""
    share: ShareConfig
    jobs: tuple[SharedJob, ...]


# ---- reading ----------------------------------------------------------------------------------

def from_table(table: Mapping[str, Any]) -> TrainingSpec:
    """A validated spec from a ``[training]`` table; unknown keys are errors."""
    return TrainingSpec.from_table(table)


def _toml(path: str | Path) -> dict[str, Any]:
    try:
        return tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        why = f"cannot read {path}: {e.strerror}" if isinstance(e, OSError) else f"{path}: {e}"
        raise ConfigError(why) from None


def read_table(path: str | Path) -> dict[str, Any]:
    """The ``[training]`` table of a TOML file (empty if it has none)."""
    return _toml(path).get("training", {})


def load(config_path: str | Path | None, args: argparse.Namespace | None = None) -> TrainingSpec:
    """TOML ``[training]`` (if a file is given) overridden by the flags that were set; an
    error about a flag's value names the flag too (``--lr / training.lr: ...``)."""
    table = dict(read_table(config_path)) if config_path else {}
    flags = []
    if args is not None:
        for key in TrainingSpec.keys():
            value = getattr(args, key, None)
            if value is not None:
                table[key] = value
                flags.append(key)
    try:
        return from_table(table)
    except ConfigError as e:
        key = e.key.partition("[")[0]
        if key in flags:
            raise e.renamed("training.", f"--{key.replace('_', '-')} / training.") from None
        raise


def load_member(config_path: str | Path, name: str) -> TrainingSpec:
    """`load`, for a process that is one of the training's workers (a peer, a stage)."""
    spec = load(config_path)
    if name not in spec.who.workers:
        raise ConfigError(f"--name: {name!r} is not one of training.workers")
    return spec


def load_controller(path: str | Path) -> ControllerConfig:
    """The share controller's TOML: ``[share]`` (a policy a controller runs) and one
    ``[[jobs]]`` entry per job (its ``[training]`` table); ConfigError naming the key."""
    doc = _toml(path)
    for key in doc:
        if key not in ("share", "jobs"):
            raise ConfigError(f"{key}: unknown table (known: share, jobs)")
    share = read_share(doc.get("share", {}))
    if share.policy not in CONTROLLED_POLICIES:
        raise ConfigError(f"share.policy: one of {', '.join(CONTROLLED_POLICIES)} (a share "
                          f"controller's), got {share.policy!r}")
    entries = doc.get("jobs")
    if not isinstance(entries, list) or not entries:
        raise ConfigError("jobs: expected at least one [[jobs]] entry")
    jobs = []
    for i, entry in enumerate(entries):
        try:
            spec = from_table(entry)
        except ConfigError as e:
            raise e.renamed("training.", f"jobs[{i}].") from None
        jobs.append(SharedJob(spec.who, tuple(spec.nodes)))
    ids = [(j.who.ps, j.who.train) for j in jobs]
    if len(set(ids)) != len(ids):
        raise ConfigError("jobs: a training (ps, train) given twice")
    return ControllerConfig(share, tuple(jobs))


# ---- command line ----------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per [training] key, default None: unset flags leave the TOML value (or the
    part's default) alone; a group per part."""
    for name, part in TrainingSpec.part_types().items():
        group = parser.add_argument_group(
            f"training parameters, {name} (override the [training] table)",
            (part.__doc__ or "").strip())
        for f in fields(part):
            default = f.default
            t = str(f.type)
            shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
            kw: dict[str, Any] = {"default": None, "dest": f.name,
                                  "help": f"{f.metadata['help']} (default: {shown!r})"}
            if f.metadata.get("choices"):
                kw["choices"] = f.metadata["choices"]
            if t in _FLAG_TYPES:
                kw["type"], kw["metavar"] = _FLAG_TYPES[t]
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
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got "
                                         f"{text!r}") from None


def _float_list(text: str) -> list[float]:
    try:
        return [float(p) for p in _str_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got "
                                         f"{text!r}") from None


# a setting's type: how its flag reads it, and what its help shows
_FLAG_TYPES: dict[str, tuple[Any, str]] = {
    "int": (int, "N"), "float": (float, "X"), "bool": (_bool, "true|false"),
    "tuple[str, ...]": (_str_list, "A,B,..."), "tuple[int, ...]": (_int_list, "N,N,..."),
    "tuple[float, ...]": (_float_list, "X,X,...")}
