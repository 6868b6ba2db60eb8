"""python -m ndnps.planner --kinds slow:1,mid:2,fast:4 [--machines 2] [--hidden 64,64,...]
                          [--dataset digits] [--micro-batches 4] [--micro-batch 16]
                          [--profile-samples 512] [--device-scale 1] [--recompute]
                          [--bandwidth-mbps 100] [--latency-ms 0] [--json FILE]

Plans pipeline + data-parallel training of the MLP on a cluster of --machines virtual machines,
each with one device of every kind (speeds relative; the fastest --device-scale times slower
than one core of this machine): profiles the model's layers on this machine (a brief
pre-training on --profile-samples samples), orders the devices into stages, splits the layers
with the integer program, and prints each stage's device, layers and predicted time, the
predicted iteration time, and the baselines (equal layer split, a split that takes the devices
as equal, pure data parallel). A transfer costs --latency-ms + its bytes at --bandwidth-mbps.
Exit 0; 2 on a bad argument (every bad flag named in one line, before any profiling).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

from .partition import Device


def parse_kinds(text: str, bandwidth: float, latency: float = 0.0) -> list[Device]:
    """"slow:1,mid:2,fast:4" → devices (ValueError naming the entry)."""
    out = []
    for entry in text.split(","):
        name, sep, speed = entry.partition(":")
        try:
            value = float(speed)
        except ValueError:
            value = -1.0
        if not sep or not name or not 0 < value < math.inf:     # nan too
            raise ValueError(f"--kinds: expected name:speed (finite speed > 0), got {entry!r}")
        out.append(Device(name, value, bandwidth, latency))
    if len({d.name for d in out}) != len(out):
        raise ValueError("--kinds: a kind named twice")
    return out


def parse_hidden(text: str) -> list[int]:
    """"128,128" → sizes (ValueError naming --hidden)."""
    try:
        hidden = [int(h) for h in text.split(",") if h.strip()]
    except ValueError:
        hidden = [0]
    if min(hidden, default=1) < 1:         # none: the MLP is one layer
        raise ValueError(f"--hidden: expected comma-separated sizes >= 1, got {text!r}")
    return hidden


def _below(flag: str, value: float, low: float, strict: bool = False) -> list[str]:
    """[why] when `value` is not a finite number >= `low` (> if `strict`), else []."""
    if math.isfinite(value) and (value > low if strict else value >= low):
        return []
    return [f"{flag}: must be {'a finite number ' if isinstance(value, float) else ''}"
            f"{'>' if strict else '>='} {low:g}, got {value:g}"]


def _unwritable(flag: str, path: str | None) -> list[str]:
    """[why] when `path` cannot be written, tried before the profiling, not after it."""
    if path is None:
        return []
    existed = os.path.lexists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        return [f"{flag}: cannot write {path}: {e.strerror or e}"]
    if not existed:
        os.unlink(path)
    return []


def check(args: argparse.Namespace) -> tuple[list[Device], list[int]]:
    """The devices and the hidden sizes; ValueError naming every bad flag, in one message."""
    bad: list[str] = []
    devices: list[Device] = []
    hidden: list[int] = []
    try:
        devices = parse_kinds(args.kinds, args.bandwidth_mbps * 1e6 / 8, args.latency_ms / 1000)
    except ValueError as e:
        bad.append(str(e))
    try:
        hidden = parse_hidden(args.hidden)
        if devices and len(hidden) + 1 < len(devices):
            bad.append(f"--hidden: {len(hidden)} hidden layers make {len(hidden) + 1} layers, "
                       f"fewer than the {len(devices)} --kinds (a stage needs one)")
    except ValueError as e:
        bad.append(str(e))
    for flag, value in (("--machines", args.machines), ("--micro-batches", args.micro_batches),
                        ("--micro-batch", args.micro_batch), ("--device-scale", args.device_scale)):
        bad += _below(flag, value, 1)
    if args.profile_samples < args.micro_batch:     # the profile needs one micro-batch
        bad.append(f"--profile-samples: must be >= --micro-batch ({args.micro_batch}), got "
                   f"{args.profile_samples}")
    bad += _below("--bandwidth-mbps", args.bandwidth_mbps, 0, strict=True)
    bad += _below("--latency-ms", args.latency_ms, 0)
    bad += _below("--seed", args.seed, 0)
    bad += _unwritable("--json", args.json)
    if bad:
        raise ValueError("; ".join(bad))
    return devices, hidden


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ndnps.planner", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kinds", required=True, help="device kinds and speeds, name:speed,...")
    p.add_argument("--machines", type=int, default=2)
    p.add_argument("--hidden", default="128,128,128,128,128,128",
                   help="the MLP's hidden layer sizes (default six of 128)")
    p.add_argument("--dataset", default="digits", choices=("digits", "synthetic"))
    p.add_argument("--micro-batches", type=int, default=4, help="k per mini-batch")
    p.add_argument("--micro-batch", type=int, default=16, help="samples per micro-batch")
    p.add_argument("--profile-samples", type=int, default=512, help="samples the profile pre-trains the model on (a)")
    p.add_argument("--device-scale", type=float, default=1.0,
                   help="the fastest kind is this many times slower than one core here")
    p.add_argument("--recompute", action="store_true",
                   help="the stages recompute their activations before the backward")
    p.add_argument("--bandwidth-mbps", type=float, default=100.0)
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="FILE", help="also write the plan as JSON")
    return p


def table(out: dict) -> str:
    lines = [f"{'stage':>5}  {'device':<8} {'speed':>5}  {'layers':<12} {'s/micro-batch':>13}  "
             f"{'sync s':>8}"]
    for s in out["stages"]:
        layers = f"{s['layers'][0]}-{s['layers'][-1]}"
        lines.append(f"{s['stage']:>5}  {s['device']:<8} {s['speed']:>5g}  {layers:<12} "
                     f"{s['seconds_per_micro_batch']:>13.5f}  {s['sync_seconds']:>8.5f}")
    lines.append(f"predicted iteration {out['predicted_iteration_seconds']:.5f} s (solved in "
                 f"{out['solve_seconds']:.2f} s)")
    for name, v in out["baselines"].items():
        lines.append(f"  {name:<14} {v:.5f} s  (planned ÷ it: "
                     f"{out['predicted_iteration_seconds'] / v:.2f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        devices, hidden = check(args)
    except ValueError as e:
        print(f"planner: {e}", file=sys.stderr)
        return 2
    from ndnps.ml.data import load_dataset
    from ndnps.ml.models import MLP

    from .plan import make_plan, on_devices
    from .profile import profile
    ds = load_dataset(args.dataset, args.seed)
    a = min(args.profile_samples, len(ds.X_train))
    if a < args.micro_batch:
        print(f"planner: --micro-batch: {args.micro_batch} samples, more than the "
              f"{args.dataset} dataset's {a} training samples", file=sys.stderr)
        return 2
    model = MLP(ds.n_features, hidden, ds.n_classes, args.seed)
    measured = profile(model, ds.X_train[:a], ds.y_train[:a], args.micro_batch,
                       steps=max(2, a // args.micro_batch))
    layers = on_devices(measured, args.device_scale, args.recompute)
    plan = make_plan(layers, devices, args.micro_batches, args.machines)
    out = {"kinds": {d.name: d.speed for d in devices}, "hidden": hidden,
           "dataset": args.dataset, **plan.as_dict()}
    print(table(out))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
