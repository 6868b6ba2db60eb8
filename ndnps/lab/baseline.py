"""The plain TCP parameter server (bench/tcp_ps.py) as the scenario runner starts it instead of
ndnps (`[run] system = "tcp"`, bottleneck topology): the same two hosts and tbf-limited link,
the same model, data, workers, SGD and versions (the scenario's [training], as tcp_ps's flags),
metrics and logs under the same names, so one summary.json compares the two on one wire.

bench/ is not part of the installed package: the baseline runs from a source checkout.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ndnps.protocol.config import TrainingSpec

from .feature import Feature, Launcher
from .process import READY_TIMEOUT, wait_until
from .values import ScenarioError

if TYPE_CHECKING:
    from .config import Scenario
    from .nodes import Plan

CHECKOUT = Path(__file__).resolve().parents[2]
MODULE = "bench.tcp_ps"


def check_available() -> None:
    """ScenarioError unless bench/tcp_ps.py is there to run."""
    script = CHECKOUT / "bench" / "tcp_ps.py"
    if not script.is_file():
        raise ScenarioError(f"run.system: \"tcp\" runs bench/tcp_ps.py from the source "
                            f"checkout; {script} is not there")


def env() -> dict[str, str]:
    """The children's environment: the checkout first on the path (bench is a top package)."""
    path = [str(CHECKOUT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {"PYTHONPATH": os.pathsep.join(path)}


def training_args(t: TrainingSpec) -> list[str]:
    """The training every role needs: workers, data, model, batches (0 for a dataset size:
    the dataset's default, as ndnps reads it)."""
    return ["--workers", str(len(t.who.workers)), "--n-samples", str(t.model.n_samples),
            "--n-features", str(t.model.n_features), "--n-classes", str(t.model.n_classes),
            "--hidden", ",".join(map(str, t.model.hidden)), "--batch", str(t.sgd.batch),
            "--lr", repr(t.sgd.lr), "--momentum", repr(t.sgd.momentum), "--seed", str(t.model.seed)]


def ps_argv(t: TrainingSpec, address: str, ready: Path, metrics: Path) -> list[str]:
    """The PS, listening on `address` (a free port, written to `ready`): versions as the
    ndnps PS counts them (epochs over the shard, capped by max_versions), evaluated and
    stopped at the target accuracy as it does."""
    return [sys.executable, "-m", MODULE, "ps", *training_args(t),
            "--epochs", str(t.sgd.epochs), "--max-versions", str(t.sgd.max_versions),
            "--weight-decay", repr(t.sgd.weight_decay), "--eval-every", str(t.sgd.eval_every),
            "--target-accuracy", repr(t.sgd.target_accuracy),
            "--host", address, "--port", "0", "--ready", str(ready), "--metrics", str(metrics)]


def worker_argv(t: TrainingSpec, index: int, address: str, port: int,
                metrics: Path) -> list[str]:
    """Worker `index` (its shard), connecting to the PS at `address`:`port`."""
    return [sys.executable, "-m", MODULE, "worker", *training_args(t), "--index", str(index),
            "--connect", address, "--port", str(port), "--metrics", str(metrics)]


def check(sc: "Scenario", doc: dict[str, Any]) -> None:
    """run.system = "tcp": bench/tcp_ps.py trains instead of ndnps, on the bottleneck's two
    hosts: sync SGD of an MLP on the synthetic dataset, no forwarders (so no [links]
    conditions), no faults."""
    if sc.topology != "bottleneck":
        raise ScenarioError("run.system: \"tcp\" (the plain TCP PS baseline) runs over the "
                            "bottleneck topology only (topology.kind = \"bottleneck\")")
    for t in sc.all_jobs:
        for key, got, wanted in (("mode", t.update.mode, "sync"),
                                 ("dataset", t.model.dataset, "synthetic"),
                                 ("model", t.model.model, "mlp")):
            if got != wanted:
                raise ScenarioError(f"training.{key}: the TCP PS baseline (run.system = "
                                    f"\"tcp\") trains {key} = {wanted!r} only, got "
                                    f"{got!r}")
    for key in doc.get("links", {}):
        if key in sc.links.as_table():
            raise ScenarioError(f"links.{key}: the TCP PS baseline (run.system = \"tcp\") has "
                                "no forwarders to emulate link conditions: the bottleneck's "
                                "tbf is its link")
    if sc.kills:
        raise ScenarioError("faults: the TCP PS baseline (run.system = \"tcp\") has no "
                            "fault handling")


def launch(runner: Launcher, plan: "Plan") -> tuple[dict, dict]:
    """Each job's bench/tcp_ps.py PS on the PS's host, listening on its end of the bottleneck,
    then its workers on theirs, connecting over it; no forwarders. Their metrics and logs go
    where the apps' go, under the same names."""
    sc, run_dir, children = runner.sc, runner.run_dir, env()
    pss, workers = {}, {}
    listening: dict[str, tuple[str, Path]] = {}    # PS -> (its address, its port file)
    for app in plan.apps:
        runner.roles[app.name] = app.role
        if app.role == "ps":
            node = plan.forwarders[app.forwarder]
            address = runner.address_of(str(node.host))
            ready = listening[app.name] = (address, run_dir / "config" / f"tcp-{app.name}.port")
            pss[app.name] = runner.spawn(app.name, runner.wrap(node) + ps_argv(
                sc.job_of(app.name), address, ready[1],
                run_dir / "metrics" / f"{app.name}.jsonl"), children)
    ports = {}
    for name, ps in pss.items():
        port_file = listening[name][1]
        wait_until(lambda f=port_file: f.exists() and f.read_text().strip().isdigit(),
                   READY_TIMEOUT, ps, "listening")
        ports[name] = int(port_file.read_text())
    for app in plan.apps:
        if app.role == "worker":
            t = sc.job_of(app.name)
            argv = runner.wrap(plan.forwarders[app.forwarder]) + worker_argv(
                t, t.who.workers.index(app.name), listening[t.who.ps][0], ports[t.who.ps],
                run_dir / "metrics" / f"{app.name}.jsonl")
            workers[app.name] = runner.spawn(app.name, argv, children)
    return pss, workers


class Baseline(Feature):
    """run.system = "tcp": the plain TCP PS trains in ndnps's stead."""
    name = "tcp"

    def active(self, sc: "Scenario") -> bool:
        return sc.system == "tcp"

    def parse(self, doc: dict[str, Any], sc: "Scenario") -> None:
        if sc.system == "tcp":
            check(sc, doc)

    def check_host(self, sc: "Scenario") -> None:
        check_available()

    def launch(self, runner: Launcher, plan: "Plan") -> tuple[dict, dict] | None:
        return launch(runner, plan)
