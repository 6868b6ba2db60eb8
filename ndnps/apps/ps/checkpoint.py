"""The PS's checkpoint (a restarted PS resumes its training) and the final model's file.

A checkpoint is one .npz: the parameters (``p:<name>``), the optimizer's momentum
(``v:<name>``), and ``__meta__`` (JSON): the training's fingerprint, its progress (version,
done, workers in index order, restarts, accuracy, async steps) and the optimizer's settings.
It is written atomically (a tmp file, fsync, os.replace): a PS killed while writing leaves the
previous checkpoint whole.  One is resumed only by the same training (the fingerprint), only
if unfinished, and only with workers and parameters that fit the configuration.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ndnps.protocol.config import PsConfig

Params = dict[str, np.ndarray]


class CheckpointError(Exception):
    """The checkpoint cannot be resumed (the message says why)."""


@dataclass
class Progress:
    """Where a training is, besides its arrays."""
    version: int
    done: bool
    workers: list[str]                  # in index order (shards and averaging)
    restarts: int                       # resumptions so far
    accuracy: float | None
    steps: dict[str, int]               # async: each worker's steps collected
    collected: dict[str, int]           # async: each worker's last step in the parameters


@dataclass
class Resumed:
    progress: Progress
    params: Params
    optimizer: dict[str, Any]           # SGD.state_dict()'s form


def fingerprint(cfg: PsConfig, model_spec: dict) -> dict:
    """What must match for a checkpoint to be resumed by this configuration."""
    return {"ps": cfg.who.ps, "train": cfg.who.train, "mode": cfg.update.mode,
            "model_spec": model_spec, "dataset": cfg.model.dataset,
            "dataset_kwargs": cfg.model.dataset_kwargs(), "seed": cfg.model.seed,
            "batch": cfg.sgd.batch}


def write(path: str, fp: dict, progress: Progress, params: Params,
          optimizer: dict[str, Any]) -> None:
    """Parameters, optimizer state (momentum), progress, atomically."""
    meta = {**fp, **asdict(progress),
            "opt": {k: optimizer[k] for k in ("lr", "momentum", "weight_decay")}}
    # Any, not ndarray: mypy would match an unpacked dict[str, ndarray] against savez's
    # allow_pickle (it cannot know the keys never say "allow_pickle")
    arrays: dict[str, Any] = {f"p:{k}": v for k, v in params.items()}
    arrays.update({f"v:{k}": v for k, v in optimizer["velocity"].items()})
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        np.savez(f, **arrays, __meta__=np.array(json.dumps(meta)))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load(path: str, fp: dict, candidates: list[str], param_names: list[str]) -> Resumed | None:
    """The checkpoint at `path`, checked against this training; None if there is none.
    Its `restarts` counts this resumption."""
    if not os.path.exists(path):
        return None
    try:
        with np.load(path) as z:
            meta = json.loads(str(z["__meta__"]))
            params = {k[2:]: z[k] for k in z.files if k.startswith("p:")}
            velocity = {k[2:]: z[k] for k in z.files if k.startswith("v:")}
    except (OSError, ValueError, KeyError) as e:
        raise CheckpointError(f"checkpoint {path} unreadable: {e}") from None
    for key, value in fp.items():
        if json.loads(json.dumps(meta.get(key))) != json.loads(json.dumps(value)):
            raise CheckpointError(f"checkpoint {path} is of another training ({key}: "
                                  f"{meta.get(key)!r} here {value!r})")
    if meta.get("done"):
        raise CheckpointError(f"checkpoint {path}: that training is finished (version "
                              f"{meta['version']}); remove it to start again")
    unknown = [g for g in meta["workers"] if g not in candidates]
    if unknown or set(params) != set(param_names):
        raise CheckpointError(f"checkpoint {path} does not fit this configuration "
                              f"(workers {unknown} unknown, or another model)")
    progress = Progress(
        version=int(meta["version"]), done=False, workers=list(meta["workers"]),
        restarts=int(meta.get("restarts", 0)) + 1, accuracy=meta.get("accuracy"),
        steps={str(g): int(n) for g, n in meta.get("steps", {}).items()},
        collected={str(g): int(n) for g, n in meta.get("collected", {}).items()})
    return Resumed(progress, {k: params[k] for k in param_names},
                   {**meta["opt"], "velocity": velocity})


def save_model(path: str, meta: dict, params: Params) -> None:
    """The trained model: its parameters and `meta` (JSON) in one .npz, at exactly `path`."""
    arrays: dict[str, Any] = params      # Any: as in write
    with open(path, "wb") as f:          # keeps the exact file name (np.savez appends .npz)
        np.savez(f, **arrays, __meta__=np.array(json.dumps(meta)))
