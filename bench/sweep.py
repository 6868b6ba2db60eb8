"""The worker-count sweep that `push` and `scaling` both read: the star scenario (one
forwarder, PS + N worker processes), sync SGD, persistent PIT vs the unicast baseline, side by
side for each N (persistent, unicast, persistent, unicast ... so both see the same machine).

Runs are memoized per process (mode, N, versions, model), so `python -m bench` running both
benchmarks pays for each run once. What is kept of a run is `figures(run)`: iteration times,
the PS's bytes out per version (its own counter) and, from the forwarder's per-face rate
trace, what the PS's face carried by packet class.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from bench.common import bench_parser, log, rnd
from bench.scenario_runs import (CpuSampler, MlpShape, ScenarioRun, WARMUP_VERSIONS,
                                 cpu_per_iteration, mlp_params, model_sets, run_scenario)

# ~100k parameters (99,978 = 399,912 bytes, 51 segments of 8000 bytes): big enough that the
# per-segment costs dominate the per-version ones, small enough for 32 workers on 2 cores.
MODEL: MlpShape = {"n_features": 256, "hidden": [256, 128]}
MODES = ("persistent", "unicast")

_cache: dict[tuple, dict] = {}


def content_bytes(n_params: int, version: int = 10) -> int:
    """Bytes of one version's payload as the PS encodes it (ndnps.protocol.messages.params_blob: the
    codec's msgpack header + the float32 vector), i.e. what the segments' Content carries."""
    import numpy as np
    from ndnps.protocol import messages
    return len(messages.params_blob(np.zeros(n_params, np.float32), version, False))


def segment_anatomy(n_params: int, key: str = "sweep-key") -> dict:
    """Bytes of each part of one full push segment, built with the PS's own code
    (ndnps.client.segments.sign_segments, the training's HMAC signer): where packet overhead goes."""
    import numpy as np
    from ndn.encoding import parse_data
    from ndnps.protocol import messages, names
    from ndnps.ndn.conventions import SEGMENT_SIZE
    from ndnps.client.security import Security
    from ndnps.client.segments import sign_segments

    sec = Security(key.encode(), names.key("ps", "t1"))
    blob = messages.params_blob(np.zeros(n_params, np.float32), 10, False)
    wires = sign_segments(blob, lambda s: names.distribute("ps", "t1", 10, s), sec.signer,
                          10_000)
    wire = wires[0]
    parts = _tlv_children(wire)
    parse_data(wire)                                   # it is a valid Data
    return {"segment_bytes": len(wire), "content": SEGMENT_SIZE,
            "overhead": len(wire) - SEGMENT_SIZE, "parts": parts, "segments": len(wires)}


def _tlv_children(wire: bytes) -> dict[str, int]:
    """Wire bytes per top-level element of a Data (type+length+value)."""
    from ndnps.ndn.tlv import read_tl
    _, pos, end = read_tl(wire, 0, len(wire))
    names_of = {7: "name", 20: "meta_info", 21: "content_tlv", 22: "signature_info",
                23: "signature_value"}
    out = {"outer_tlv_header": pos}
    while pos < end:
        t, vpos, vend = read_tl(wire, pos, end)
        out[names_of.get(t, f"type_{t}")] = vend - pos
        pos = vend
    return out


def figures(run: ScenarioRun, node: str = "fwd") -> dict:
    """What a sweep (or tree) run contributes: iteration times, and the PS's egress per
    version from its own counter and, by packet class, from the forwarder's trace of its face."""
    versions = len(run.ps_versions)
    sent: dict[str, list[int]] = {}              # class -> [packets, bytes] the PS sent
    for (face, typ, cls), (p, b) in run.face_classes(node).items():
        if face == "ps" and typ.startswith("In"):
            c = sent.setdefault(cls, [0, 0])
            c[0] += p
            c[1] += b
    model = run.model_bytes
    n_params = int(run.summary["model_params"])
    per_version = {cls: b / versions for cls, (_, b) in sent.items()}
    ps_end = run.summary.get("ps_end", {})
    return {
        "workers": run.n_workers,
        "push_mode": run.summary["push_mode"],
        "versions": versions,
        "model_params": n_params,
        "model_bytes": model,
        "content_bytes": content_bytes(n_params),
        "iteration_median": rnd(run.iteration_median(), 5),
        "iteration_mean": rnd(run.iteration_mean(), 5),
        "compute_median": rnd(run.compute_median(), 6),
        "collect_wait_median": rnd(run.ps_median("collect_wait"), 5),
        "ps_bytes_out_per_version": rnd(run.ps_bytes_per_version(), 1),
        "ps_class_bytes_per_version": {k: round(v, 1) for k, v in sorted(per_version.items())},
        "ps_class_packets": {k: p for k, (p, _) in sorted(sent.items())},
        "probes": run.counter("probes"),
        "retransmissions": run.counter("retransmissions"),
        "probes_answered_by_ps": int(ps_end.get("probes_answered", 0) or 0),
        "wall_seconds": round(run.wall, 1),
        "warmup_versions": WARMUP_VERSIONS,
    }


def sets_for(mode: str, n: int, versions: int, model: MlpShape) -> list[str]:
    return [f"topology.workers={n}", f"training.push_mode=\"{mode}\"",
            f"training.max_versions={versions}", "training.eval_every=100000",
            # 32 processes on 2 cores: start-up alone takes tens of seconds
            "run.timeout=1800", "training.key=\"sweep-key\"",
            *model_sets(model["n_features"], model["hidden"])]


def run_point(mode: str, n: int, versions: int, model: MlpShape = MODEL,
              keep: Path | None = None, attempt: int = 0) -> dict:
    key = (mode, n, versions, model["n_features"], tuple(model["hidden"]))
    if key in _cache:
        return _cache[key]
    base = keep or Path(tempfile.mkdtemp(prefix="sweep-"))
    out = base / f"{mode}-n{n}" if not attempt else base / f"{mode}-n{n}-retry{attempt}"
    try:
        with CpuSampler(str(out)) as sampler:
            run = run_scenario("sync-sgd", sets_for(mode, n, versions, model), out)
        fig = figures(run)
        fig["notes"] = run.notes
        fig["cpu_ms_per_iteration"] = cpu_per_iteration(run, sampler)
    finally:
        if keep is None:
            shutil.rmtree(base, ignore_errors=True)
    log(f"  {mode:10s} N={n:2d}: iteration {fig['iteration_median'] * 1000:8.1f} ms (median), "
        f"PS out/version {fig['ps_bytes_out_per_version'] / fig['model_bytes']:.4f} x model, "
        f"probes {fig['probes']}, retx {fig['retransmissions']}, {fig['wall_seconds']} s")
    _cache[key] = fig
    return fig


def sweep(ns: list[int], versions: int, model: MlpShape = MODEL, modes=MODES,
          keep: Path | None = None) -> dict[str, dict[int, dict]]:
    """{mode: {N: figures}}, the modes alternating for each N."""
    out: dict[str, dict[int, dict]] = {m: {} for m in modes}
    for n in ns:
        for mode in modes:
            for attempt in range(2):
                try:
                    out[mode][n] = run_point(mode, n, versions, model, keep, attempt)
                    break
                except Exception as e:                      # noqa: BLE001 - reported
                    log(f"  {mode} N={n}: run failed ({e}); "
                        f"{'retrying' if attempt == 0 else 'giving up'}")
                    if attempt:
                        raise
    return out


def model_label(model: MlpShape) -> str:
    return (f"synthetic MLP {model['n_features']}-{'-'.join(map(str, model['hidden']))}-10, "
            f"{mlp_params(model['n_features'], model['hidden'])} parameters")


def sweep_main(prog: str, doc: str, default_ns: str, argv: list[str] | None):
    """The command line push and scaling share: (args, the sweep {mode: {N: figures}}, N list,
    versions)."""
    p = bench_parser(prog, doc, "N = 2,8 and 6 versions")
    p.add_argument("--workers", default=default_ns, help="N values (comma-separated)")
    p.add_argument("--versions", type=int, default=12, help="versions per run (default 12)")
    args = p.parse_args(argv)
    ns = [2, 8] if args.quick else [int(x) for x in args.workers.split(",")]
    versions = 6 if args.quick else args.versions
    log(f"{prog.split('.')[-1]}: {model_label(MODEL)}; N = {ns}; {versions} versions per run")
    return args, sweep(ns, versions, keep=args.keep), ns, versions
