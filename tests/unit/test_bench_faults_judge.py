"""bench/fault_runs.py's reading of a fault run: which drops were of live workers, and which
worker kills no PS could notice (the PS killed too, within worker_timeout)."""
from __future__ import annotations

from pathlib import Path

from bench.fault_runs import killed_while_forwarder_down, live_workers_dropped, unnoticed_kills


def kill(worker: str, t: float) -> dict:
    return {"kind": "kill", "role": "worker", "worker": worker, "t": t, "restarted": {}}


def test_a_drop_beyond_the_kills_of_that_worker_is_a_live_worker_dropped():
    kills = [kill("w1", 5.0), kill("w3", 9.0)]
    records = [{"event": "dropped", "worker": "w1"}, {"event": "dropped", "worker": "w3"},
               {"event": "dropped", "worker": "w3"}, {"event": "dropped", "worker": "w2"},
               {"version": 7, "collect_wait": 0.01}]
    assert live_workers_dropped(records, kills) == {"w3": 1, "w2": 1}
    assert live_workers_dropped(records[:2], kills) == {}


def test_a_worker_killed_with_the_ps_goes_unnoticed(tmp_path: Path):
    (tmp_path / "scenario.toml").write_text("[training]\nworker_timeout = 5.0\n")
    kills = [kill("w1", 5.0), kill("w3", 13.28), kill("w4", 30.0)]
    faults = [*kills, {"kind": "kill", "role": "ps", "ps": "ps", "t": 13.28},
              {"kind": "kill", "role": "ps", "ps": "ps", "t": 40.0, "skipped": "not running"}]
    assert unnoticed_kills(kills, faults, tmp_path) == [kills[1]]
    (tmp_path / "scenario.toml").write_text("[training]\n")     # worker_timeout 30 s
    assert unnoticed_kills(kills, faults, tmp_path) == [kills[0], kills[1]]


def test_a_worker_killed_while_the_forwarder_was_down_need_not_reconnect():
    faults = [kill("w1", 5.0), kill("w4", 22.178),
              {"kind": "kill", "role": "forwarder", "forwarder": "fwd", "t": 22.178,
               "restarted": {"t": 23.2}}]
    assert killed_while_forwarder_down(faults) == {"w4"}
    assert killed_while_forwarder_down(faults[:2]) == set()
