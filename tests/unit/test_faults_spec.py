"""[faults] in scenario files (docs/faults.md): worker kills by version, optional restart, seeded
random kills; every error names the key; the scenario as run round-trips through TOML."""
from __future__ import annotations

import tomllib

import pytest

from ndnps.lab.tomltext import to_toml
from ndnps.lab.spec import Kill, ScenarioError, load, parse
from ndnps.protocol.config import ConfigError, from_table


def test_explicit_kills_sorted_by_version():
    sc = parse({"faults": {"kill": [{"worker": "w3", "at_version": 50},
                                    {"worker": "w2", "at_version": 10, "restart_after": 2}]}},
               "x")
    assert sc.kills == [Kill("w2", 10, 2.0), Kill("w3", 50, None)]


def test_random_kills_are_the_same_for_a_seed_and_within_bounds():
    doc = {"faults": {"random": {"kills": 5, "seed": 3, "from_version": 20, "to_version": 40,
                                 "restart_after": 1.5}}}
    a, b = parse(doc, "x").kills, parse(doc, "x").kills
    assert a == b and len(a) == 5
    assert all(20 <= k.at_version <= 40 and k.worker in ("w1", "w2", "w3", "w4") and
               k.restart_after == 1.5 for k in a)
    assert [k.at_version for k in a] == sorted(k.at_version for k in a)


def test_no_faults_by_default():
    assert load("sync-sgd").kills == []


def test_fault_scenarios_exist_and_kill():
    assert load("worker-killed").kills == [Kill("w2", 40, 2.0)]
    chaos = load("chaos")
    assert len(chaos.kills) == 5 and chaos.links.loss > 0
    assert {k.role for k in chaos.kills} == {"worker", "ps", "forwarder"}
    assert chaos.training.who.min_workers < chaos.workers        # kills must not end the job


@pytest.mark.parametrize("faults, key", [
    ({"kil": []}, "faults.kil"),
    ({"kill": {"worker": "w1"}}, "faults.kill"),
    ({"kill": ["w1"]}, "faults.kill[0]"),
    ({"kill": [{"worker": "w9", "at_version": 3}]}, "faults.kill[0].worker"),
    ({"kill": [{"at_version": 3}]}, "faults.kill[0].worker"),
    ({"kill": [{"worker": "w1"}]}, "faults.kill[0].at_version"),
    ({"kill": [{"worker": "w1", "at_version": 0}]}, "faults.kill[0].at_version"),
    ({"kill": [{"worker": "w1", "at_version": 2.5}]}, "faults.kill[0].at_version"),
    ({"kill": [{"worker": "w1", "at_version": 3, "restart_after": -1}]},
     "faults.kill[0].restart_after"),
    ({"kill": [{"worker": "w1", "at_version": 3, "when": 1}]}, "faults.kill[0].when"),
    ({"random": 3}, "faults.random"),
    ({"random": {"kills": -1}}, "faults.random.kills"),
    ({"random": {"seed": "a"}}, "faults.random.seed"),
    ({"random": {"from_version": 50, "to_version": 10}}, "faults.random.to_version"),
    ({"random": {"often": 1}}, "faults.random.often"),
])
def test_bad_faults_name_the_key(faults, key):
    with pytest.raises(ScenarioError) as e:
        parse({"faults": faults}, "bad")
    assert str(e.value).startswith(key), str(e.value)


def test_faults_round_trip_through_the_scenario_as_run():
    sc = load("worker-killed")
    doc = dict(sc.raw)
    doc["training"] = sc.training.as_table()
    again = parse(tomllib.loads(to_toml(doc)), "again")
    assert again.kills == sc.kills


def test_worker_loss_policy_is_validated():
    assert from_table({"on_worker_loss": "wait"}).tasks.on_worker_loss == "wait"
    assert from_table({}).tasks.on_worker_loss == "continue"
    with pytest.raises(ConfigError, match=r"^training.on_worker_loss: must be one of"):
        from_table({"on_worker_loss": "retry"})
    with pytest.raises(ConfigError, match=r"^training.rejoin_interval"):
        from_table({"rejoin_interval": 0})
    with pytest.raises(ConfigError, match=r"^training.rejoin_timeout"):
        from_table({"rejoin_timeout": -1})


def test_ps_and_forwarder_kills():
    sc = parse({"faults": {"kill": [
        {"ps": True, "at_version": 30, "restart_after": 1.0},
        {"forwarder": "fwd", "at_version": 60, "restart_after": 0.5}]}}, "x")
    assert sc.kills == [Kill("ps", 30, 1.0, "ps"), Kill("fwd", 60, 0.5, "forwarder")]
    tree = parse({"topology": {"kind": "tree"},
                  "faults": {"kill": [{"forwarder": "leaf2", "at_version": 5,
                                       "restart_after": 1}]}}, "x")
    assert tree.kills == [Kill("leaf2", 5, 1.0, "forwarder")]


@pytest.mark.parametrize("faults, training, key", [
    ({"kill": [{"ps": True, "worker": "w1", "at_version": 3}]}, {}, "faults.kill[0].worker"),
    ({"kill": [{"ps": 1, "at_version": 3, "restart_after": 1}]}, {}, "faults.kill[0].ps"),
    ({"kill": [{"ps": True, "at_version": 3}]}, {}, "faults.kill[0].restart_after"),
    ({"kill": [{"forwarder": "root", "at_version": 3, "restart_after": 1}]}, {},
     "faults.kill[0].forwarder"),
    ({"kill": [{"forwarder": "fwd", "at_version": 3}]}, {}, "faults.kill[0].restart_after"),
])
def test_bad_ps_and_forwarder_kills_name_the_key(faults, training, key):
    with pytest.raises(ScenarioError) as e:
        parse({"faults": faults, "training": training}, "bad")
    assert str(e.value).startswith(key), str(e.value)


def test_checkpoint_in_both_modes():
    assert from_table({"checkpoint": "x.npz", "mode": "async"}).checkpointing.checkpoint == \
        "x.npz"
    with pytest.raises(ConfigError, match=r"^training.checkpoint_every"):
        from_table({"checkpoint_every": 0})
