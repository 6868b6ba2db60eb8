"""A pipeline training's configuration (docs/hetero.md): the training's pipeline fields
(ndnps.protocol.config), the scenario's [[device_kinds]] and [pipeline] (ndnps.lab.pipeline_plan),
the plan the runner makes before the run, the stage app's micro-batches — every error naming
its key."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from ndnps.apps.stage.__main__ import micro_slices
from ndnps.lab import pipeline, pipeline_plan, spec
from ndnps.lab.spec import ScenarioError
from ndnps.protocol.config import ConfigError, from_table

KINDS = ["fast:4", "mid:2", "slow:1"]
APPS = ["m1-fast", "m1-mid", "m1-slow", "m2-fast", "m2-mid", "m2-slow"]


def table(**kw):
    return {"machines": 2, "collective": "ring", "stage_kinds": KINDS, "stage_layers": [3, 2, 3],
            "hidden": [32] * 7, "workers": APPS, "batch": 32, **kw}


def test_a_pipeline_training_names_its_apps_and_its_recorder():
    cfg = from_table(table())
    assert cfg.stages.stage_apps() == [APPS[:3], APPS[3:]]
    assert cfg.stages.stage_devices() == [("fast", 4.0), ("mid", 2.0), ("slow", 1.0)]
    assert cfg.recorder == "m1-slow"              # the first machine's last stage: the loss
    assert from_table({}).recorder == "ps" and from_table({}).stages.machines == 0


@pytest.mark.parametrize("changes,message", [
    ({"collective": ""}, "training.machines: a pipeline trains an mlp in sync mode"),
    ({"model": "softmax"}, "training.machines"),
    ({"stage_layers": [3, 2]}, "training.stage_layers: one count >= 1 per stage"),
    ({"stage_layers": [3, 2, 2]}, "training.stage_layers: .* hold 7 layers, the mlp has 8"),
    ({"stage_kinds": ["fast:4", "mid", "slow:1"]}, r"training.stage_kinds\[1\]"),
    ({"stage_kinds": ["fast:4", "mid:0", "slow:1"]}, r"training.stage_kinds\[1\]"),
    ({"stage_kinds": ["fast:4", "fast:2", "slow:1"]}, "training.stage_kinds: one distinct"),
    ({"workers": APPS[::-1]}, "training.workers: a pipeline's apps are m<j>-<kind>"),
    ({"micro_batches": 64}, "training.micro_batches: 64 micro-batches of a mini-batch of 32"),
    ({"target_accuracy": 0.9}, "training.target_accuracy: not with a pipeline"),
    ({"recompute": "yes"}, "training.recompute: expected true or false"),
    ({"device_scale": 0.5}, "training.device_scale: must be >= 1"),
])
def test_a_bad_pipeline_training_names_the_key(changes, message):
    with pytest.raises(ConfigError, match=message):
        from_table(table(**changes))


DOC = """
[topology]
kind = "star"
[[device_kinds]]
name = "slow"
speed = 1.0
[[device_kinds]]
name = "fast"
speed = 3.0
[pipeline]
machines = 2
micro_batches = 2
device_scale = 2.0
[training]
hidden = [16, 16, 16]
batch = 16
epochs = 1
"""


def scenario(extra: str = "", doc: str = DOC, overrides: list[str] | None = None):
    import tomllib
    return spec.parse(spec.apply_overrides(tomllib.loads(doc + extra), overrides or []), "t")


def test_the_scenario_tables_make_the_training():
    sc = scenario()
    t = sc.training
    assert (t.stages.machines, t.peers.collective, t.stages.micro_batches,
            t.stages.device_scale) == (2, "ring", 2, 2.0)
    assert t.who.workers == ("m1-slow", "m1-fast", "m2-slow", "m2-fast") and sc.workers == 4
    assert t.stages.stage_layers == (2, 2) and sc.pipeline.kinds == [("slow", 1.0), ("fast", 3.0)]


def test_the_plan_orders_the_kinds_and_splits_the_layers(tmp_path):
    sc = scenario()
    plan = pipeline_plan.make_plan(sc)
    t = sc.training
    assert t.stages.stage_kinds == ("fast:3", "slow:1")    # the fastest first (equal links)
    assert t.who.workers == ("m1-fast", "m1-slow", "m2-fast", "m2-slow")
    assert sum(t.stages.stage_layers) == 4 and plan["stage_layers"] == [
        list(range(t.stages.stage_layers[0])), list(range(t.stages.stage_layers[0], 4))]
    assert plan["predicted_seconds"] == plan["predicted_iteration_seconds"] > 0
    assert len(plan["profile"]) == 4 and set(plan["baselines"]) == {
        "equal_layers", "equal_devices", "data_parallel"}
    pipeline_plan.write_plan(tmp_path, plan)
    assert json.loads((tmp_path / "plan.json").read_text())["split"] == "planned"
    equal = scenario(overrides=["pipeline.split=\"equal-layers\""])
    plan = pipeline_plan.make_plan(equal)
    assert equal.training.stages.stage_layers == (2, 2)
    assert plan["predicted_seconds"] == plan["baselines"]["equal_layers"]


@pytest.mark.parametrize("extra,overrides,message", [
    ("", ["pipeline.split=\"best\""], "pipeline.split: one of planned, equal-layers"),
    ("", ["pipeline.machines=0"], "pipeline.machines: must be within"),
    ("", ["pipeline.device_scale=0.5"], "pipeline.device_scale"),
    ("", ["pipeline.recompute=1"], "pipeline.recompute: expected true or false"),
    ("", ["pipeline.colour=1"], "pipeline.colour: unknown key"),
    ("", ["training.workers=[\"a\"]"], "training.workers: a pipeline names its stage apps"),
    ("", ["topology.kind=\"tree\""], "pipeline: on a local star"),
    ("", ["training.model=\"softmax\""], "training.model: a pipeline cuts an mlp's"),
    ("", ["training.mode=\"async\""], "training.mode: a pipeline trains in sync mode"),
    ("", ["training.hidden=[]"], "training.hidden: 1 layers cannot make 2 stages"),
    ("", ["training.batch=1"], "pipeline.micro_batches: 2 micro-batches of a mini-batch of "
     "training.batch = 1"),
    ("[[device_kinds]]\nname = \"fast\"\nspeed = 1.0\n", [], r"device_kinds\[2\].name: 'fast' "
     "named twice"),
    ("[[device_kinds]]\nname = \"x\"\nspeed = 0\n", [], r"device_kinds\[2\].speed"),
    ("[[device_kinds]]\nname = \"a:b\"\nspeed = 1\n", [], r"device_kinds\[2\].name"),
    ("[[device_kinds]]\nname = \"x\"\nspeed = 1\ncolour = 2\n", [],
     r"device_kinds\[2\].colour: unknown key"),
])
def test_a_bad_pipeline_scenario_names_the_key(extra, overrides, message):
    with pytest.raises(ScenarioError, match=message):
        scenario(extra, overrides=overrides)


def test_a_pipeline_needs_both_tables():
    with pytest.raises(ScenarioError, match="pipeline: a pipeline needs both"):
        scenario(doc=DOC.split("[pipeline]")[0] + "[training]\nbatch = 16\n")


def test_a_batch_no_shard_holds_is_refused_by_the_plan():
    sc = scenario(overrides=["training.batch=1000"])
    with pytest.raises(ScenarioError, match="training.batch: 1347 samples over 2 machines hold "
                       "no mini-batch of 1000"):
        pipeline_plan.make_plan(sc)


def test_more_kinds_than_layers_is_refused_by_the_plan():
    sc = scenario(overrides=["training.hidden=[16]"])
    sc.pipeline.kinds.append(("mid", 2.0))
    with pytest.raises(ScenarioError, match="training.hidden: 2 layers cannot make 3 stages"):
        pipeline_plan.make_plan(sc)


@pytest.mark.parametrize("batch,micro,sizes", [(96, 4, [24] * 4), (10, 4, [3, 3, 2, 2]),
                                               (5, 5, [1] * 5), (7, 1, [7])])
def test_micro_batches_cover_the_mini_batch_in_order(batch, micro, sizes):
    slices = micro_slices(batch, micro)
    assert [s.stop - s.start for s in slices] == sizes
    assert slices[0].start == 0 and slices[-1].stop == batch
    assert all(a.stop == b.start for a, b in zip(slices, slices[1:]))


def test_the_stage_app_refuses_a_training_without_machines(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text("[training]\nworkers = [\"w1\"]\n")
    out = subprocess.run([sys.executable, "-m", "ndnps.apps.stage", "--name", "w1", "--config",
                          str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "training.machines: 0" in out.stderr


def test_the_stage_parameters_saved_make_the_model(tmp_path):
    """(No run: the summary's assembly on hand-made files.) The first machine's stages'
    parameter files together are the whole model; a file missing is said, not guessed."""
    sc = scenario()
    pipeline_plan.make_plan(sc)
    from ndnps.ml.data import load_dataset
    from ndnps.ml.models import build_model
    t = sc.training
    ds = load_dataset(t.model.dataset, t.model.seed)
    model = build_model({"n_in": ds.n_features, "n_classes": ds.n_classes,
                         **t.model.model_spec()}, t.model.seed)
    (tmp_path / pipeline.STAGES_DIR).mkdir()
    grid = t.stages.stage_apps()
    at = 0
    for a, n in zip(grid[0], t.stages.stage_layers):
        np.savez(tmp_path / pipeline.STAGES_DIR / f"{a}.npz",
                 **{f"{p}{i}": model.params[f"{p}{i}"] for i in range(at, at + n)
                    for p in ("W", "b")})
        at += n
    got = pipeline._accuracy(tmp_path, sc, {a: [] for row in grid for a in row}, grid)
    assert got["final_accuracy"] == model.accuracy(ds.X_test, ds.y_test)
    (tmp_path / pipeline.STAGES_DIR / f"{grid[0][1]}.npz").unlink()
    assert pipeline._accuracy(tmp_path, sc, {}, grid) == {
        "final_accuracy": None, "accuracy_note": f"{grid[0][1]}.npz missing"}


def test_a_plan_may_reuse_an_earlier_runs_profile(tmp_path):
    """pipeline.profile: runs compared side by side planned from one profile, not each from
    its own (a shared host's noise moves a profile, and with it the split)."""
    sc = scenario()
    plan = pipeline_plan.make_plan(sc)
    pipeline_plan.write_plan(tmp_path, plan)
    again = scenario(overrides=[f"pipeline.profile=\"{tmp_path / 'plan.json'}\""])
    plan2 = pipeline_plan.make_plan(again)
    assert plan2["profile"] == plan["profile"]
    assert plan2["stage_layers"] == plan["stage_layers"]
    assert plan2["predicted_seconds"] == plan["predicted_seconds"]
    assert again.training.device.layer_seconds == sc.training.device.layer_seconds
    for overrides, message in [
            ([f"pipeline.profile=\"{tmp_path / 'none.json'}\""], "pipeline.profile: .*none.json: "
             "not a plan.json with a profile"),
            ([f"pipeline.profile=\"{tmp_path / 'plan.json'}\"", "training.hidden=[16, 32, 16]"],
             "pipeline.profile: .* profiles another model or micro-batch size"),
            ([f"pipeline.profile=\"{tmp_path / 'plan.json'}\"", "training.batch=32"],
             "pipeline.profile: .* profiles another model or micro-batch size")]:
        other = scenario(overrides=overrides)
        with pytest.raises(ScenarioError, match=message):
            pipeline_plan.make_plan(other)
    with pytest.raises(ScenarioError, match="pipeline.profile: a plan.json's path, got 3"):
        scenario(overrides=["pipeline.profile=3"])


def test_the_prediction_from_a_runs_own_compute():
    """The summary's decomposition: each stage's device time per step as profiled is what a
    profiled device spends (factor × its layers' per-sample costs × the mini-batch), and the
    plan's simulator given the run's compute ÷ the profile's gives the plan's prediction at 1
    and more for slower stages."""
    sc = scenario()
    plan = pipeline_plan.make_plan(sc)
    p, t = sc.pipeline, sc.training
    steps = pipeline._profiled_step(p, t)
    fastest = max(v for _, v in t.stages.stage_devices())
    at = 0
    for s, ((_, speed), n) in enumerate(zip(t.stages.stage_devices(), t.stages.stage_layers)):
        factor = p.device_scale * fastest / speed
        cost = t.sgd.batch * (t.device.step_cost(at, at + n - 1, False)
                              + t.device.step_cost(at, at + n - 1, True))
        assert steps[s] == pytest.approx(factor * cost)
        at += n
    assert pipeline._predict(p, t, [1.0, 1.0]) == pytest.approx(plan["predicted_seconds"],
                                                              abs=1e-6)     # rounded
    assert pipeline._predict(p, t, [2.0, 1.0]) > plan["predicted_seconds"]


def test_the_loss_plot_draws_the_stages_loss_and_marks_the_final_accuracy(tmp_path, monkeypatch):
    """(No run.) A pipeline evaluates only at the end: its plot is each machine's last stage's
    loss, with the stages' model's final accuracy marked, not an empty accuracy line."""
    import matplotlib
    matplotlib.use("Agg")
    sc = scenario()
    (tmp_path / "metrics").mkdir()
    for j, row in enumerate(sc.training.stages.stage_apps()):
        (tmp_path / "metrics" / f"{row[-1]}.jsonl").write_text("".join(
            json.dumps({"version": v, "t": 0.1 * v, "loss": 2.0 / v + j}) + "\n"
            for v in range(1, 6)))
    (tmp_path / "summary.json").write_text(json.dumps({"final_accuracy": 0.8125}))
    made = {}
    monkeypatch.setattr(pipeline, "save", lambda fig, path: made.setdefault(path.name, fig)
                        and path)
    assert pipeline.PipelineFeature().plot(tmp_path, sc, tmp_path) == \
        [tmp_path / "loss_accuracy.png"]
    fig = made["loss_accuracy.png"]
    labels = [t.get_text() for ax in fig.axes if ax.get_legend()
              for t in ax.get_legend().get_texts()]
    assert sum(label.startswith("training loss") for label in labels) == 2
    assert "final test accuracy 0.8125 (the stages' model)" in labels
