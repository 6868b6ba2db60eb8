"""bench.scale's pure parts: a summary.json read into each part's figures, the sharing
efficiency, the J-job scenario it writes."""
from __future__ import annotations

import pytest

from bench.scale import collective_figures, efficiency, jobs_doc, model_sets, ps_figures

SIMULATED = {"virtual_seconds": 0.5, "wall_seconds": 3.25, "events": 25000,
             "events_per_second": 7692}


def test_ps_figures_with_and_without_aggregation() -> None:
    plain = ps_figures({"ps_bytes_in_per_version_over_model": 16.2571, "iteration_seconds": 0.0055,
                        "versions": 5, "simulated": SIMULATED})
    assert plain["ps_in_over_model"] == 16.2571
    assert plain["slot_collisions"] is None and plain["fallbacks"] is None
    assert plain["events_per_s"] == 7692 and plain["sim_wall_s"] == 3.25
    ina = ps_figures({"ps_bytes_in_per_version_over_model": 1.13, "iteration_seconds": 0.002,
                      "ina": {"slot_collisions": 4, "segments_fallback": 3,
                              "subgroup_fallbacks": 1, "aggregators": {"a2-1": ["w1"]}}})
    assert (ina["slot_collisions"], ina["fallbacks"], ina["aggregators"]) == (4, 4, ["a2-1"])
    assert ina["events"] is None                    # not simulated: no cost, no error


def test_collective_figures_worst_level() -> None:
    f = collective_figures({"sync_seconds": 0.0022, "bytes_over_analytic": {"0": 1.031, "1": 0.95},
                            "parameters_identical": True})
    assert f["bytes_over_analytic_worst"] == 0.95       # the farthest from 1, below or above
    assert collective_figures({})["bytes_over_analytic_worst"] is None


def test_efficiency_by_template() -> None:
    shared: dict[str, dict[str, float | None]] = {
        "big1": {"completion_s": 2.0}, "small1": {"completion_s": 1.0},
        "big2": {"completion_s": None}}
    alone: dict[str, float | None] = {"big": 1.0, "small": 1.0}
    of = {"big1": "big", "small1": "small", "big2": "big"}
    assert efficiency(shared, alone, of) == pytest.approx(0.75)     # (0.5 + 1) / 2
    assert efficiency({}, alone, of) is None


def test_jobs_doc_cycles_the_templates() -> None:
    doc, template_of = jobs_doc(5)
    names = [j["ps"] for j in doc["jobs"]]
    assert names == ["big1", "peers1", "small1", "big2", "peers2"]
    assert template_of["peers2"] == "peers"
    assert len({j["key"] for j in doc["jobs"]}) == 5                # each job its own key
    assert [j["start"] for j in doc["jobs"]] == [0.0, 0.5, 1.0, 1.5, 2.0]


def test_model_sets_give_every_shard_a_batch() -> None:
    samples = int(next(s for s in model_sets(128, 1024) if "n_samples" in s).split("=")[1])
    assert samples * 0.75 >= 1024 * 32
