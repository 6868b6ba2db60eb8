"""The PS's checkpoint (docs/faults.md): written atomically, resumed exactly (parameters, momentum,
version, workers), refused when it belongs to another training or is finished."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from ndnps.apps.ps.__main__ import JobFailed, ParameterServer
from tests.support.memnet import MemNet
from ndnps.lab.series import fault_counts
from ndnps.protocol.config import PsConfig, from_table


def config(path, **kw):
    return PsConfig.of(from_table({"workers": ["w1", "w2"], "key": "k",
                                   "checkpoint": str(path), **kw}))


def trained(path, **kw) -> ParameterServer:
    ps = ParameterServer(config(path, **kw), MemNet().app())
    ps.prepare_content(["w1", "w2"])
    rng = np.random.default_rng(1)
    for _ in range(3):                       # a few steps: non-zero momentum
        ps.opt.step(ps.model.params, {k: rng.normal(size=v.shape).astype(np.float32)
                                      for k, v in ps.model.params.items()})
        ps.version += 1
    return ps


def test_checkpoint_round_trip(tmp_path):
    path = tmp_path / "ckpt.npz"
    ps = trained(path)
    ps.write_checkpoint(str(path))
    assert path.exists() and not os.path.exists(f"{path}.tmp")
    again = ParameterServer(config(path), MemNet().app())
    assert again.resume() == ["w1", "w2"]
    assert again.version == again.resumed_from == 3 and again.restarts == 1
    for k, v in ps.model.params.items():
        assert np.array_equal(again.model.params[k], v)
        assert np.array_equal(again.opt.velocity[k], ps.opt.velocity[k])
    # the next step is the same on both: nothing lost, nothing applied twice
    g = {k: np.ones_like(v) for k, v in ps.model.params.items()}
    ps.opt.step(ps.model.params, g)
    again.opt.step(again.model.params, g)
    assert all(np.array_equal(again.model.params[k], ps.model.params[k]) for k in g)


@pytest.mark.asyncio
async def test_a_resumed_ps_pushes_and_serves_its_checkpoints_version(tmp_path):
    """A worker that missed the checkpoint's version (restarted just before the PS was killed)
    must get it from the resumed PS: pushed again, and its probes answered."""
    from ndnps.protocol import names
    path = tmp_path / "ckpt.npz"
    ps = trained(path)
    ps.write_checkpoint(str(path))
    first = ps.serving.publish(ps.version, False)
    again = ParameterServer(config(path), MemNet().app())
    again.resume()
    again.prepare_content(["w1", "w2"])
    replies: list[bytes] = []
    again.serving.on_probe(names.distribute("ps", "t1", 3, 0), None, replies.append, None)
    assert replies == []                            # nothing kept yet
    await again.push_resumed()
    assert again.counters.segments_pushed == len(first)
    again.serving.on_probe(names.distribute("ps", "t1", 3, 0), None, replies.append, None)
    assert replies == [first[0]]                    # the same bytes as the PS before


def test_no_checkpoint_starts_afresh(tmp_path):
    ps = ParameterServer(config(tmp_path / "none.npz"), MemNet().app())
    assert ps.resume() is None and ps.version == 0


def test_a_torn_write_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.npz"
    ps = trained(path)
    ps.write_checkpoint(str(path))
    before = path.read_bytes()
    ps.version += 1

    def die(*_a, **_k):
        raise OSError("killed while writing")
    monkeypatch.setattr(os, "replace", die)
    with pytest.raises(OSError):
        ps.write_checkpoint(str(path))
    assert path.read_bytes() == before


@pytest.mark.parametrize("change, why", [
    ({"train": "other"}, "another training (train"),
    ({"hidden": [32]}, "another training (model_spec"),
    ({"seed": 5}, "another training (seed"),
    ({"workers": ["w1", "w3"]}, "does not fit"),
])
def test_a_checkpoint_of_another_training_is_refused(tmp_path, change, why):
    path = tmp_path / "ckpt.npz"
    trained(path).write_checkpoint(str(path))
    other = ParameterServer(config(path, **change), MemNet().app())
    with pytest.raises(JobFailed, match=re.escape(why)):
        other.resume()


def test_a_finished_training_is_not_redone(tmp_path):
    path = tmp_path / "ckpt.npz"
    ps = trained(path)
    ps.done = True
    ps.write_checkpoint(str(path))
    with pytest.raises(JobFailed, match="finished"):
        ParameterServer(config(path), MemNet().app()).resume()


def test_fault_counts_a_worker_lost_by_a_killed_ps_rejoins_with_the_restarted_one():
    """w3 dropped by the first PS, which was killed before w3 came back: the restarted PS
    assigning w3 its task again is its rejoin; w4 dropped and re-offered by one PS."""
    records = [
        {"event": "task", "worker": "w3", "accepted": True},
        {"event": "start", "workers": ["w3", "w4"]},
        {"event": "dropped", "worker": "w3"},
        {"event": "task", "worker": "w3", "accepted": True},      # the restarted PS
        {"event": "task", "worker": "w4", "accepted": True},
        {"event": "start", "workers": ["w3", "w4"]},
        {"event": "dropped", "worker": "w4"},
        {"event": "rejoined", "worker": "w4"},
        {"event": "dropped", "worker": "w4"},                     # lost at the end
        {"version": 5, "collect_wait": 0.1, "gradients": 1},
    ]
    assert fault_counts(records) == {"workers_lost": 3, "workers_rejoined": 2,
                                     "short_versions": 1}
