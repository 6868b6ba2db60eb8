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

from ndnps.protocol.config import TrainingConfig

from .spec import ScenarioError

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


def training_args(t: TrainingConfig) -> list[str]:
    """The training every role needs: workers, data, model, batches (0 for a dataset size:
    the dataset's default, as ndnps reads it)."""
    return ["--workers", str(len(t.workers)), "--n-samples", str(t.n_samples),
            "--n-features", str(t.n_features), "--n-classes", str(t.n_classes),
            "--hidden", ",".join(map(str, t.hidden)), "--batch", str(t.batch),
            "--lr", repr(t.lr), "--momentum", repr(t.momentum), "--seed", str(t.seed)]


def ps_argv(t: TrainingConfig, address: str, ready: Path, metrics: Path) -> list[str]:
    """The PS, listening on `address` (a free port, written to `ready`): versions as the
    ndnps PS counts them (epochs over the shard, capped by max_versions), evaluated and
    stopped at the target accuracy as it does."""
    return [sys.executable, "-m", MODULE, "ps", *training_args(t),
            "--epochs", str(t.epochs), "--max-versions", str(t.max_versions),
            "--weight-decay", repr(t.weight_decay), "--eval-every", str(t.eval_every),
            "--target-accuracy", repr(t.target_accuracy),
            "--host", address, "--port", "0", "--ready", str(ready), "--metrics", str(metrics)]


def worker_argv(t: TrainingConfig, index: int, address: str, port: int,
                metrics: Path) -> list[str]:
    """Worker `index` (its shard), connecting to the PS at `address`:`port`."""
    return [sys.executable, "-m", MODULE, "worker", *training_args(t), "--index", str(index),
            "--connect", address, "--port", str(port), "--metrics", str(metrics)]
