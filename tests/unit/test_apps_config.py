"""The apps' supporting pieces: training configuration (TOML and flags, errors naming the key;
its parts, each checking its own settings, and each program's config of them), message
payloads, metrics lines, pacing, held Interests, and the command lines' --help."""
from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys

import numpy as np
import pytest

from ndnps.protocol import messages
from ndnps.protocol.codec import CodecError, encode_tensors
from ndnps.lab.metrics import Delta, MetricsWriter, read_metrics
from ndnps.client.pacer import Pacer
from ndnps.client.pending import HeldInterests
from ndnps.protocol import parts
from ndnps.protocol.config import (ConfigError, PeerConfig, PsConfig, StageConfig, TrainingSpec,
                                   add_arguments, from_table, load)

# ---- training configuration --------------------------------------------------------------------


def test_defaults_are_valid_and_match_the_reference_defaults():
    from ndnps.ml.train import DEFAULTS
    cfg = from_table({})
    assert (cfg.model.dataset, cfg.model.model, list(cfg.model.hidden), cfg.sgd.epochs,
            cfg.sgd.batch, cfg.sgd.lr, cfg.sgd.momentum) == \
        (DEFAULTS["dataset"], DEFAULTS["model"], DEFAULTS["hidden"], DEFAULTS["epochs"],
         DEFAULTS["batch"], DEFAULTS["lr"], DEFAULTS["momentum"])


def test_toml_table_then_flags_override(tmp_path):
    path = tmp_path / "scenario.toml"
    path.write_text('[forwarders]\nx = 1\n\n[training]\nps = "lab"\nworkers = ["a", "b"]\n'
                    'lr = 1\nmode = "async"\nkey = "s3cret"\n')
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--lr", "0.5", "--workers", "a,b,c", "--hidden", "32,16"])
    cfg = load(path, args)
    assert (cfg.who.ps, cfg.who.workers, cfg.sgd.lr, cfg.update.mode, cfg.model.hidden) == \
        ("lab", ("a", "b", "c"), 0.5, "async", (32, 16))
    assert isinstance(load(path).sgd.lr, float) and load(path).who.key_bytes == b"s3cret"
    # a bad value given by flag names the flag and the key
    with pytest.raises(ConfigError, match=r"^--lr / training\.lr: must be > 0"):
        load(path, parser.parse_args(["--lr", "-1"]))
    with pytest.raises(ConfigError, match=r"^--workers / training\.workers\[1\]"):
        load(path, parser.parse_args(["--workers", "a,b/c"]))
    bad = tmp_path / "bad.toml"                 # the file's value: the key alone
    bad.write_text("[training]\nlr = -1\n")
    with pytest.raises(ConfigError, match=r"^training\.lr: must be > 0"):
        load(bad, parser.parse_args(["--epochs", "2"]))


@pytest.mark.parametrize("table,message", [
    ({"lr": 0}, "training.lr: must be > 0"),
    ({"lr": "fast"}, "training.lr: expected a number"),
    ({"epochs": 2.5}, "training.epochs: expected an integer"),
    ({"epochs": True}, "training.epochs: expected an integer"),
    ({"mode": "semi"}, "training.mode: must be one of sync, async"),
    ({"push_mode": "x"}, "training.push_mode: must be one of"),
    ({"workers": []}, "training.workers: need at least one"),
    ({"workers": ["a", "a"]}, "training.workers: duplicate"),
    ({"workers": ["a/b"]}, "training.workers[0]"),
    ({"ps": "*insert*"}, "training.ps"),
    ({"min_workers": 4}, "training.min_workers: 4 > 3"),
    ({"momentum": 1.5}, "training.momentum: must be <= 1"),
    ({"target_accuracy": -0.1}, "training.target_accuracy: must be >= 0"),
    ({"hidden": [0]}, "training.hidden"),
    ({"n_features": 10}, "training.n_features: applies to dataset"),
    ({"colour": "red"}, "training.colour: unknown key"),
    ({"probe_min": 5.0, "probe_max": 1.0}, "training.probe_min"),
    ({"lr": float("nan")}, "training.lr: expected a finite number, got nan"),
    ({"weight_decay": float("inf")}, "training.weight_decay: expected a finite number, got inf"),
    ({"layer_seconds": [1.0, float("-inf")]}, "training.layer_seconds: expected finite numbers"),
])
def test_errors_name_the_offending_key(table, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("*", r"\*")):
        from_table(table)


def test_bad_toml_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[training\n")
    with pytest.raises(ConfigError, match="bad.toml"):
        load(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path / "missing.toml")


@pytest.mark.parametrize("module", ["ndnps.apps.ps", "ndnps.apps.worker"])
def test_help_documents_the_flags(module):
    out = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0
    for flag in ("--config", "--metrics", "--transport"):
        assert flag in out.stdout
    if module == "ndnps.apps.ps":
        for flag in ("--workers", "--min-workers", "--mode", "--push-mode", "--key",
                     "--max-staleness", "--target-accuracy", "--save", "--worker-timeout"):
            assert flag in out.stdout
    else:
        for flag in ("--name", "--key", "--drop-pushes-prob", "--forge-gradient-at"):
            assert flag in out.stdout


def test_ps_rejects_a_bad_flag_with_exit_2():
    out = subprocess.run([sys.executable, "-m", "ndnps.apps.ps", "--lr", "-1"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "training.lr" in out.stderr


@pytest.mark.parametrize("argv,message", [
    (["--content-patience", "0"], "must be > 0"),
    (["--config", "{toml}"], "training.ps_timeout: expected seconds"),
])
def test_worker_rejects_a_bad_content_patience_with_exit_2(tmp_path, argv, message):
    toml = tmp_path / "t.toml"
    toml.write_text('[training]\nps_timeout = "soon"\n')
    argv = [a.replace("{toml}", str(toml)) for a in argv]
    out = subprocess.run([sys.executable, "-m", "ndnps.apps.worker", "--name", "w1", *argv],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and message in out.stderr, out.stderr


def test_every_field_has_a_flag():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = {a.dest for a in parser._actions}
    assert set(TrainingSpec.keys()) <= flags and len(TrainingSpec.keys()) == 72


# ---- the parts, and each program's config of them ---------------------------------------------

# one bad value per part: (part, its key, the value, what the error says)
BAD = [
    (parts.Identity, "workers", [], "need at least one worker"),
    (parts.Identity, "ps", "a/b", "must be a non-empty string without '/'"),
    (parts.Model, "hidden", [0], "need positive layer sizes"),
    (parts.Model, "n_features", 3, "applies to dataset"),
    (parts.Sgd, "lr", 0, "must be > 0"),
    (parts.Sgd, "momentum", float("nan"), "expected a finite number"),
    (parts.Update, "mode", "semi", "must be one of sync, async"),
    (parts.Transport, "window", 0, "must be >= 1"),
    (parts.Transport, "segment_timeout", float("inf"), "expected a finite number"),
    (parts.Push, "push_rate", "fast", "must be one of adaptive, fixed"),
    (parts.Probe, "probe_min", 9.0, "must be <= probe_max"),
    (parts.Liveness, "worker_timeout", "soon", "expected a number"),
    (parts.Tasks, "on_worker_loss", "retry", "must be one of continue, wait"),
    (parts.Registration, "register_tries", 2.5, "expected an integer"),
    (parts.Checkpointing, "checkpoint_every", 0, "must be >= 1"),
    (parts.Aggregation, "aggregate_via", ["x"], "needs aggregate_at"),
    (parts.Sharing, "share_controller", "*insert*", "reserved marker"),
    (parts.Collective, "collective", "star", "must be one of"),
    (parts.Stages, "recompute", "yes", "expected true or false"),
    (parts.Device, "layer_seconds", [1.0, float("nan")], "expected finite numbers"),
]


@pytest.mark.parametrize("part, key, value, why", BAD, ids=[f"{p.__name__}.{k}"
                                                           for p, k, _, _ in BAD])
def test_each_part_refuses_its_bad_values_naming_the_key(part, key, value, why):
    with pytest.raises(ConfigError) as e:
        part(**{key: value})
    assert str(e.value).startswith(f"training.{key}: ") and why in str(e.value), str(e.value)
    # the same from the whole table
    with pytest.raises(ConfigError, match=f"^training.{key}"):
        from_table({key: value})


def test_every_part_is_in_the_table_once_and_is_frozen():
    keys = [k for part in TrainingSpec.part_types().values() for k in part.keys()]
    assert len(keys) == len(set(keys)) == len(TrainingSpec.keys())
    cfg = from_table({"workers": ["a", "b"], "hidden": [8]})
    with pytest.raises(AttributeError):
        cfg.sgd.lr = 1.0                                        # type: ignore[misc]
    assert cfg.who.workers == ("a", "b") and cfg.as_table()["workers"] == ["a", "b"]
    assert from_table(cfg.as_table()) == cfg                    # the table round-trips
    changed = cfg.with_values(lr=0.5)
    assert changed.sgd.lr == 0.5 and cfg.sgd.lr == 0.1 and changed.model == cfg.model
    with pytest.raises(ConfigError, match="^training.lr"):
        cfg.with_values(lr=-1)


def test_each_program_reads_only_its_parts():
    spec = from_table({"workers": ["a", "b"], "key": "k"})
    owned = {PsConfig: {"who", "model", "sgd", "update", "transport", "push", "probe",
                        "liveness", "tasks", "registration", "checkpointing", "aggregation",
                        "sharing", "device"},
             PeerConfig: {"who", "model", "sgd", "transport", "liveness", "aggregation",
                          "sharing", "peers", "device"},
             StageConfig: {"who", "model", "sgd", "transport", "liveness", "stages", "device"}}
    for program, names in owned.items():
        cfg = program.of(spec)
        assert set(program.__dataclass_fields__) == names
        assert all(getattr(cfg, n) is getattr(spec, n) for n in names)
    assert not hasattr(PsConfig.of(spec), "stages") and not hasattr(PeerConfig.of(spec), "tasks")


# ---- messages -----------------------------------------------------------------------------------

def test_message_round_trips():
    vec = np.arange(10, dtype=np.float32)
    assert messages.parse_task_reply(messages.task_reply(False, "busy")) == (False, "busy")
    p = messages.parse_params(messages.params_blob(vec, 7, True, {"w1": 3}), 10, 7)
    assert p.version == 7 and p.done and p.collected == {"w1": 3}
    np.testing.assert_array_equal(p.vector, vec)
    g = messages.parse_gradient(messages.gradient_blob(vec, 4, 2, 0.5, 0.01), 10, 4)
    assert (g.step, g.base_version, g.loss) == (4, 2, 0.5)


@pytest.mark.parametrize("blob,parse", [
    (messages.params_blob(np.zeros(10, np.float32), 7, False), lambda b: messages.parse_params(b, 10, 8)),
    (messages.params_blob(np.zeros(9, np.float32), 7, False), lambda b: messages.parse_params(b, 10, 7)),
    (messages.params_blob(np.zeros(10, np.float32), 7, False)[:-1], lambda b: messages.parse_params(b, 10, 7)),
    (messages.gradient_blob(np.zeros(10, np.float32), 3, 1, 0, 0), lambda b: messages.parse_gradient(b, 10, 4)),
    (messages.gradient_blob(np.full(10, np.nan, np.float32), 3, 1, 0, 0), lambda b: messages.parse_gradient(b, 10, 3)),
    # one value not finite among finite ones, and +inf beside -inf (their sum is NaN)
    (messages.params_blob(np.r_[np.zeros(9, np.float32), np.float32(np.inf)], 7, False),
     lambda b: messages.parse_params(b, 10, 7)),
    (messages.gradient_blob(np.r_[np.full(8, 1, np.float32), np.float32(np.inf), np.float32(-np.inf)],
                            3, 1, 0, 0), lambda b: messages.parse_gradient(b, 10, 3)),
    (encode_tensors([np.zeros(10, np.float64)], kind="gradient", step=3, base_version=0),
     lambda b: messages.parse_gradient(b, 10, 3)),
    (encode_tensors([np.zeros(10, np.float32)], kind="gradient", step=3, base_version=-1),
     lambda b: messages.parse_gradient(b, 10, 3)),
    (b"\x81\xa6accept\xa3yes", messages.parse_task_reply),
    (b"garbage", messages.parse_task_reply),
    (encode_tensors([np.zeros(3, np.float32)], kind="content"), messages.parse_content),
])
def test_malformed_payloads_raise_codec_error(blob, parse):
    with pytest.raises(CodecError):
        parse(blob)


# ---- metrics ------------------------------------------------------------------------------------

def test_metrics_lines_and_deltas(tmp_path):
    d = Delta()
    assert d.take({"a": 5, "b": 1}) == {"a": 5, "b": 1}
    assert d.take({"a": 7, "b": 1}) == {"a": 2, "b": 0}
    path = tmp_path / "m" / "x.jsonl"
    m = MetricsWriter(path, role="ps")
    m.write({"version": 1, "loss": np.float32(0.5), "acc": float("nan")})
    m.close()
    (rec,) = read_metrics(path)
    assert rec["role"] == "ps" and rec["loss"] == 0.5 and rec["acc"] is None and "t" in rec
    json.dumps(rec)
    MetricsWriter(None).write({"x": 1})             # no path: nothing, no error


# ---- pacing and held Interests -----------------------------------------------------------------

@pytest.mark.asyncio
async def test_pacer_limits_the_rate_and_yields():
    clock = [0.0]
    sleeps = []

    async def sleep(dt):
        sleeps.append(dt)
        clock[0] += dt
    drained = []

    async def drain():
        drained.append(1)
    pacer = Pacer(rate_mbps=8.0, burst=4, drain=drain, clock=lambda: clock[0], sleep=sleep)
    sent = []
    await pacer.send_all([b"x" * 8000] * 20, sent.append)
    assert len(sent) == 20 and len(drained) == 5
    await pacer.send_all([b"x" * 100] * 6, sent.append)
    assert len(drained) == 7                    # after 4, and after the last 2: all left
    # 20 x 8000 bytes at 1 MB/s, less the initial burst allowance of 4 x 8800: ~0.125 s
    assert sum(s for s in sleeps if s) == pytest.approx(0.16 - 4 * 0.0088, rel=0.01)
    assert pacer.limited                        # (the fake clock stood still: no tokens back)
    pacer.set_rate(0.0)                         # unlimited: never waits
    await pacer.send_all([b"x" * 8000] * 20, sent.append)
    assert not pacer.limited and len(sent) == 46
    pacer.set_rate(1000.0)
    await pacer.send_all([b"x" * 8000] * 3, sent.append)
    assert pacer.limited
    with pytest.raises(ValueError):
        pacer.set_rate(-1.0)


@pytest.mark.asyncio
async def test_a_pacer_whose_sleeps_overshoot_keeps_its_rate():
    """A loaded host wakes the loop late: the tokens of the time overslept are the bucket's,
    so a push still leaves at its rate (it lost them, and a push set at 76 Mbit/s left at 45)."""
    clock = [0.0]

    async def sleep(dt):
        clock[0] += dt + (0.002 if dt else 0.0)     # every timed sleep 2 ms late
    pacer = Pacer(rate_mbps=8.0, burst=4, clock=lambda: clock[0], sleep=sleep)
    await pacer.send_all([b"x" * 8000] * 100, lambda w: None)
    # 800 kB at 1 MB/s, less the first burst's 4 x 8800: 0.765 s; with every overshoot lost
    # (one per packet once the bucket is empty) it took 0.765 + 96 x 0.002 = 0.957 s
    assert clock[0] == pytest.approx(0.8 - 4 * 0.0088, abs=0.005)


def test_held_interests_bounded_and_expiring():
    now = [1000]
    held = HeldInterests(limit=3, clock=lambda: now[0])
    got = []
    held.hold("a", lambda w: got.append(("a1", w)), 2000)
    held.hold("a", lambda w: got.append(("a2", w)), 1500)
    held.hold("b", lambda w: got.append(("b", w)), 2000)
    held.hold("c", lambda w: got.append(("c", w)), 2000)      # over the limit: oldest goes
    assert len(held) == 3 and held.dropped == 1
    now[0] = 1600
    assert held.release("a", b"A") == 0 and held.expired == 1  # a2 expired
    assert held.release("b", b"B") == 1 and got == [("b", b"B")]
    now[0] = 3000
    held.purge()
    assert len(held) == 0


@pytest.mark.asyncio
async def test_pacer_without_rate_only_yields():
    pacer = Pacer(burst=2)
    sent = []
    await asyncio.wait_for(pacer.send_all([b"a"] * 5, sent.append), 1)
    assert sent == [b"a"] * 5 and pacer.waited == 0


def test_a_metrics_line_still_being_written_is_not_read_yet(tmp_path):
    path = tmp_path / "m.jsonl"
    w = MetricsWriter(path, role="ps")
    w.write({"version": 1})
    w.write({"version": 2})
    w.close()
    with open(path, "a") as f:          # a live writer's next record, half-way through
        f.write('{"version":3,"wor')
    assert [r["version"] for r in read_metrics(path)] == [1, 2]


def test_large_finite_values_whose_float32_sum_overflows_are_accepted():
    vec = np.full(10, 3e38, np.float32)          # their float32 sum is inf; each is finite
    p = messages.parse_params(messages.params_blob(vec, 7, False), 10, 7)
    assert np.array_equal(p.vector, vec)
