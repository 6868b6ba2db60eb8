"""The training's model profiled on this machine (ndnps.planner.profile): a pipeline's planner
input, and the time an emulated device (ndnps.ml.device) takes for each layer."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .values import ScenarioError

if TYPE_CHECKING:
    from ndnps.protocol.config import TrainingSpec


def profile_layers(profile: list[dict[str, Any]]) -> list:
    """A plan.json's profile as the planner's layers."""
    from ndnps.planner.partition import Layer
    return [Layer(l["layer"], l["forward"], l["backward"], l["activation_bytes"],
                  l["param_bytes"]) for l in profile]


def load_profile(path: str, t: "TrainingSpec", micro: int) -> list:
    """pipeline.profile: the profile in an earlier run's plan.json, checked to be this model's
    at this micro-batch size (each layer's bytes)."""
    key = "pipeline.profile"
    try:
        profile = json.loads(Path(path).read_text())["profile"]
        layers = profile_layers(profile)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ScenarioError(f"{key}: {path}: not a plan.json with a profile ({e})") from None
    from ndnps.ml.data import load_dataset
    ds = load_dataset(t.model.dataset, t.model.seed, **t.model.dataset_kwargs())
    widths = [ds.n_features, *t.model.hidden, ds.n_classes]
    want = [(float(micro * b * 4), float((a + 1) * b * 4)) for a, b in zip(widths, widths[1:])]
    if [(l.activation_bytes, l.param_bytes) for l in layers] != want:
        raise ScenarioError(f"{key}: {path} profiles another model or micro-batch size "
                            f"({len(layers)} layers; this one has {len(want)} at {micro} "
                            f"samples a micro-batch)")
    return layers


def profile_model(t: "TrainingSpec", micro: int, samples: int = 512,
                  key: str = "training.batch") -> list:
    """The planner's profile of the training's model on this machine (ndnps.planner.profile):
    each layer's forward and backward CPU time per micro-batch of `micro` samples, after a
    brief pre-training on `samples` of them."""
    from ndnps.ml.data import load_dataset
    from ndnps.ml.models import build_model
    from ndnps.planner.profile import profile
    ds = load_dataset(t.model.dataset, t.model.seed, **t.model.dataset_kwargs())
    a = min(samples, len(ds.X_train))
    if a < micro:
        raise ScenarioError(f"{key}: {a} samples hold no micro-batch of {micro}")
    model = build_model({"n_in": ds.n_features, "n_classes": ds.n_classes,
                         **t.model.model_spec()}, t.model.seed)
    return profile(model, ds.X_train[:a], ds.y_train[:a], micro, steps=max(4, a // micro))


def fill_layer_seconds(t: "TrainingSpec") -> "TrainingSpec":
    """A PS's job with device_time = "profiled" and no profile given: its workers' whole-model
    step profiled on this machine at its batch (each worker's gradient is one operation); the
    job as it is otherwise."""
    if t.device.device_time == "profiled" and not t.device.layer_seconds and \
            not t.stages.machines:
        return t.with_values(layer_seconds=[c / t.sgd.batch
                                            for l in profile_model(t, t.sgd.batch)
                                            for c in (l.forward, l.backward)])
    return t
