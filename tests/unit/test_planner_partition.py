"""The planner's split (ndnps.planner.partition) on hand-made profiles whose best
split is known, the stages' order, and the integer program's size limit."""
from __future__ import annotations

import pytest

from ndnps.planner.partition import (Device, Layer, order_devices, partition,
                                     split_by_bounds)


def layers(costs: list[float], act: float = 0.0, params: float = 0.0) -> list[Layer]:
    return [Layer(f"l{i}", c / 3, 2 * c / 3, act, params) for i, c in enumerate(costs)]


def test_equal_devices_split_equal_layers_equally():
    split = partition(layers([1.0] * 6), [Device("a", 1), Device("b", 1), Device("c", 1)], 4)
    assert split.stages == [[0, 1], [2, 3], [4, 5]]
    assert split.stage_seconds == pytest.approx([2.0, 2.0, 2.0])


def test_shares_follow_the_speeds():
    # 1 : 2 : 4 — seven unit layers: 1, 2, 4 of them (every stage 1 s on the fastest's clock)
    devs = [Device("slow", 1), Device("mid", 2), Device("fast", 4)]
    split = partition(layers([1.0] * 7), devs, 8)
    assert [len(s) for s in split.stages] == [1, 2, 4]
    assert split.stage_seconds == pytest.approx([4.0, 4.0, 4.0])
    equal = split_by_bounds(layers([1.0] * 7), devs, [3, 2, 2], 8)
    assert split.objective < equal.objective


def test_a_heavy_boundary_is_avoided():
    # four unit layers on two equal devices: the middle cut carries a huge activation
    ls = [Layer("a", 0.5, 0.5, 0, 0), Layer("b", 0.5, 0.5, 1e9, 0),
          Layer("c", 0.5, 0.5, 0, 0), Layer("d", 0.5, 0.5, 0, 0)]
    split = partition(ls, [Device("x", 1, 1e9), Device("y", 1, 1e9)], 4)
    assert split.stages in ([[0], [1, 2, 3]], [[0, 1, 2], [3]])


def test_synchronisation_counts_once_per_mini_batch():
    # one layer holds every parameter: with many machines its stage should be short
    ls = [Layer("emb", 0.1, 0.1, 0, 1e8)] + layers([1.0] * 3)
    split = partition(ls, [Device("a", 1, 1e8), Device("b", 1, 1e8)], 2, machines=4)
    assert split.sync_seconds[0] == pytest.approx(1e8 * 1.5 / 1e8)
    assert split.objective == pytest.approx(sum(split.stage_seconds)
                                            + max(split.stage_seconds) + 1.5)


def test_the_objective_is_the_1f1b_time_of_one_slow_stage():
    """Σ stages + (k − 1) × the slowest: what the simulator gives when the slowest stage is the
    last (no transfers), and at most that otherwise (a slow first stage's forwards overlap the
    fill of the others) while every stage's backward is twice its forward; the split that
    shortens the fill wins over one that only balances."""
    from ndnps.exchanges.pipeline.schedule import simulate
    for times in ([1.0, 1.0, 4.0], [4.0, 1.0, 1.0], [1.0, 4.0, 2.0]):
        for k in (1, 4, 8):
            sim = simulate([t / 3 for t in times], [2 * t / 3 for t in times], k)
            bound = sum(times) + (k - 1) * max(times)
            assert sim.seconds <= bound + 1e-9 and sim.seconds >= bound - max(times)
            if times[-1] == max(times) or k == 1:
                assert sim.seconds == pytest.approx(bound)
    # forward : backward differing between stages, the bound is no bound (the objective is
    # an estimate; the plan's prediction simulates)
    sim = simulate([0.5, 3.0, 0.5], [3.0, 0.5, 0.5], 2)
    assert sim.seconds > sum([3.5, 3.5, 1.0]) + 1 * 3.5
    # 1 : 2 : 4, the slow stage's one layer paces (4 s): the fast stage takes the rest
    devs = [Device("fast", 4), Device("mid", 2), Device("slow", 1)]
    split = partition(layers([1.0] * 7), devs, 8)
    assert [len(s) for s in split.stages] == [4, 2, 1]


def test_stages_are_ordered_by_the_ratio_then_speed():
    devs = [Device("slow", 1), Device("fast", 4), Device("mid", 2)]
    assert [d.name for d in order_devices(devs, 1e6, 2)] == ["fast", "mid", "slow"]
    # a device with a faster link communicates less per unit of compute: first
    devs = [Device("slow", 1, 1e9), Device("fast", 4)]
    assert [d.name for d in order_devices(devs, 1e6, 2)] == ["slow", "fast"]


def test_twenty_layers_are_split_and_bad_input_is_refused():
    split = partition(layers([1.0 + (i % 5) * 0.3 for i in range(20)], act=1e4, params=1e5),
                      [Device("a", 1), Device("b", 2), Device("c", 4)], 8, machines=2)
    assert sum(len(s) for s in split.stages) == 20
    with pytest.raises(ValueError, match="cannot make"):
        partition(layers([1.0]), [Device("a", 1), Device("b", 1)], 2)
    with pytest.raises(ValueError, match="do not cover"):
        split_by_bounds(layers([1.0] * 3), [Device("a", 1)], [2], 1)


def test_a_profile_measures_every_layer_of_the_model():
    import numpy as np

    from ndnps.ml.models import MLP
    from ndnps.planner.profile import profile
    model = MLP(10, [32, 32, 16], 4, 0)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 10)).astype(np.float32)
    y = rng.integers(0, 4, 64)
    before = {k: v.copy() for k, v in model.params.items()}
    ls = profile(model, X, y, micro_batch=8, steps=4)
    assert [l.name for l in ls] == ["layer0", "layer1", "layer2", "layer3"]
    assert [l.activation_bytes for l in ls] == [8 * 32 * 4, 8 * 32 * 4, 8 * 16 * 4, 8 * 4 * 4]
    assert [l.param_bytes for l in ls] == [11 * 32 * 4, 33 * 32 * 4, 33 * 16 * 4, 17 * 4 * 4]
    assert all(l.forward > 0 and l.backward > 0 for l in ls)
    assert any(not np.array_equal(before[k], model.params[k]) for k in before)   # pre-trained
    with pytest.raises(ValueError):
        profile(model, X[:4], y[:4], micro_batch=8)


def test_the_plan_beats_its_baselines_on_a_1_2_4_cluster():
    from ndnps.planner.plan import make_plan
    ls = layers([1.0] * 7, act=1e3, params=1e4)
    devs = [Device("slow", 1, 1e9), Device("mid", 2, 1e9), Device("fast", 4, 1e9)]
    plan = make_plan(ls, devs, micro=8, machines=2)
    assert [d.name for d in plan.devices] == ["fast", "mid", "slow"]     # the ratio's tie
    assert [len(s) for s in plan.split.stages] == [4, 2, 1]
    assert plan.predicted < plan.baselines["equal_layers"]
    assert plan.predicted < plan.baselines["equal_devices"]
    out = plan.as_dict()
    assert [s["device"] for s in out["stages"]] == ["fast", "mid", "slow"]
    assert out["baseline_splits"]["equal_layers"] == [[0, 1, 2], [3, 4], [5, 6]]


def test_a_prediction_given_the_stages_compute_as_it_ran():
    """predict's `compute`: each stage's forward and backward × its factor (a run's compute ÷
    the profile's); at 1 the plan's own prediction, a slower slowest stage a longer step."""
    from ndnps.exchanges.pipeline.schedule import simulate
    from ndnps.planner.plan import predict
    ls = layers([1.0] * 7)
    devs = [Device("fast", 4), Device("mid", 2), Device("slow", 1)]
    split = split_by_bounds(ls, devs, [4, 2, 1], 8)
    base = predict(split, ls, 8)
    assert predict(split, ls, 8, [1.0, 1.0, 1.0]) == base
    # every stage 4 s a micro-batch (1/3 forward): doubling the last doubles its operations
    want = simulate([4 / 3, 4 / 3, 8 / 3], [8 / 3, 8 / 3, 16 / 3], 8)
    assert predict(split, ls, 8, [1.0, 1.0, 2.0]) == pytest.approx(max(want.finish))
    assert predict(split, ls, 8, [1.0, 1.0, 2.0]) > base
    with pytest.raises(ValueError, match="compute: one factor per stage"):
        predict(split, ls, 8, [1.0, 1.0])


def test_recomputation_costs_the_stages_but_not_the_data_parallel_baseline():
    from ndnps.planner.plan import data_parallel, on_devices
    ls = layers([1.0] * 6, params=1e4)
    devs = [Device("slow", 1, 1e9), Device("fast", 2, 1e9)]
    again = on_devices(ls, recompute=True)
    assert [l.backward for l in again] == pytest.approx([1.0] * 6)        # 2/3 + the 1/3 forward
    assert data_parallel(again, devs, 4, 2) == pytest.approx(data_parallel(ls, devs, 4, 2))


def test_the_command_line_refuses_bad_kinds(capsys):
    from ndnps.planner.__main__ import main
    assert main(["--kinds", "slow:0,fast:4"]) == 2
    assert "--kinds" in capsys.readouterr().err
    assert main(["--kinds", "a:1,a:2"]) == 2


@pytest.mark.parametrize("argv, flag", [
    (["--kinds", "a:1,b:nan"], "--kinds"), (["--kinds", "a:1,b:inf"], "--kinds"),
    (["--kinds", "a:1", "--profile-samples", "0"], "--profile-samples"),
    (["--kinds", "a:1", "--hidden", "abc"], "--hidden"),
    (["--kinds", "a:1", "--bandwidth-mbps", "nan"], "--bandwidth-mbps"),
    (["--kinds", "a:1", "--latency-ms", "inf"], "--latency-ms"),
])
def test_every_bad_flag_is_one_line_naming_it(argv, flag, capsys):
    from ndnps.planner.__main__ import main
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"planner: {flag}: ") and err.count("\n") == 1


def test_several_bad_flags_are_one_message(capsys):
    from ndnps.planner.__main__ import main
    assert main(["--kinds", "a:1", "--hidden", "abc", "--machines", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--hidden: " in err and "; --machines: " in err


def test_an_unwritable_json_is_refused_before_the_profiling(tmp_path, monkeypatch, capsys):
    import ndnps.planner.profile as profile
    from ndnps.planner.__main__ import main

    def never(*args, **kwargs):
        raise AssertionError("profiled before checking --json")
    monkeypatch.setattr(profile, "profile", never)
    assert main(["--kinds", "a:1", "--json", str(tmp_path / "no" / "plan.json")]) == 2
    assert capsys.readouterr().err.startswith("planner: --json: cannot write ")
    assert main(["--kinds", "a:1", "--json", str(tmp_path)]) == 2       # a directory
    # a writable path passes, and the check leaves no file behind it
    with pytest.raises(AssertionError, match="profiled"):
        main(["--kinds", "a:1", "--json", str(tmp_path / "plan.json")])
    assert not (tmp_path / "plan.json").exists()
