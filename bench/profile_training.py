"""Profile a whole training (not a registered benchmark): the scenario runner under
`py-spy record --subprocesses`, every process sampled, then CPU time per role and function.

    python -m bench.profile_training [--model 100k|1M|digits] [--workers 4] [--versions 40]
                                     [--push-mode persistent|unicast] [--rate 200]
                                     [--set KEY=VALUE ...] [--out DIR] [--top 25]

py-spy samples only threads that are running (no --idle) and does not pause them
(--nonblocking), so samples / rate = CPU seconds. Start-up is left out: every stack under an
import (`_find_and_load`) or before the training (the runner itself) is dropped. For each role
(forwarder, ps, worker = all workers together) it prints CPU seconds and CPU ms per version,
the functions with the most self time, and the inclusive time of the functions named by
--focus (default: the ndnps/python-ndn entry points of the hot path).
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import ROOT
from bench.scenario_runs import model_sets

PYSPY = Path(sys.executable).with_name("py-spy")
MODELS: dict[str, tuple[int, list[int]] | None] = {
    "100k": (256, [256, 128]), "1M": (1024, [768, 256]), "digits": None}
ROLE = [("forwarder", re.compile(r"-m (ndnps\.)?forwarder\b")),
        ("ps", re.compile(r"-m ndnps\.apps\.ps\b")),
        ("worker", re.compile(r"-m ndnps\.apps\.worker\b")),
        ("runner", re.compile(r"ndnps\.scenario"))]


def _frame(f: str) -> str:
    """'func (path/file.py:123)' -> 'func (file.py)'."""
    m = re.match(r"(.*) \((.*?):\d+\)$", f)
    if not m:
        return f
    return f"{m.group(1)} ({m.group(2).split('/')[-1]})"


def summarize(raw: Path, rate: int, versions: int, top: int) -> str:
    self_t: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    incl: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    mod: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    total: collections.Counter = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        procs = [f for f in frames if f.startswith("process ")]
        role = next((r for r, rx in ROLE if procs and rx.search(procs[-1])), "other")
        if role in ("runner", "other"):
            continue
        frames = [f for f in frames if not f.startswith("process ")]
        if not frames or any("_find_and_load" in f for f in frames):
            continue                                  # start-up: imports
        n = int(count)
        total[role] += n
        leaf = _frame(frames[-1])
        self_t[role][leaf] += n
        # the innermost frame in our own code or python-ndn: who pays for the C below it
        for f in reversed(frames):
            m = re.search(r"\((.*?):\d+\)$", f)
            if m and re.search(r"(ndnps|apps|forwarder|ndn)/", m.group(1)):
                mod[role][_frame(f)] += n
                break
        for f in set(_frame(x) for x in frames):
            incl[role][f] += n
    out = []
    for role in ("forwarder", "ps", "worker"):
        n = total[role]
        if not n:
            continue
        out.append(f"== {role}: {n / rate:.2f} CPU s, {1000 * n / rate / versions:.1f} CPU ms "
                   f"per version (samples {n})")
        out.append("  self time:")
        for f, c in self_t[role].most_common(top):
            out.append(f"    {100 * c / n:5.1f}%  {f}")
        out.append("  innermost ndnps/apps/forwarder/python-ndn frame (self + C below it):")
        for f, c in mod[role].most_common(top):
            out.append(f"    {100 * c / n:5.1f}%  {f}")
        out.append("  inclusive:")
        for f, c in incl[role].most_common(top + 10):
            out.append(f"    {100 * c / n:5.1f}%  {f}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile_training",
                                description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=list(MODELS), default="100k")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--versions", type=int, default=40)
    p.add_argument("--push-mode", choices=["persistent", "unicast"], default="persistent")
    p.add_argument("--scenario", default="sync-sgd")
    p.add_argument("--rate", type=int, default=200)
    p.add_argument("--set", action="append", default=[], help="more scenario overrides")
    p.add_argument("--out", type=Path)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="proftrain-"))
    out.mkdir(parents=True, exist_ok=True)
    sets = [f"topology.workers={args.workers}", f"training.push_mode=\"{args.push_mode}\"",
            f"training.max_versions={args.versions}", "training.eval_every=100000",
            "training.key=\"profile-key\"", "run.timeout=1800", *args.set]
    shape = MODELS[args.model]
    if shape:
        sets += model_sets(*shape)
    raw = out / "all.raw"
    cmd = [str(PYSPY), "record", "--subprocesses", "--nonblocking", "--rate", str(args.rate),
           "--format", "raw", "--output", str(raw), "--", sys.executable, "-m", "ndnps.scenario",
           args.scenario, "--out", str(out / "run"), "--plain"]
    for s in sets:
        cmd += ["--set", s]
    with open(out / "py-spy.log", "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=str(ROOT)).returncode
    if rc != 0 or not raw.exists():
        print((out / "py-spy.log").read_text()[-3000:], file=sys.stderr)
        return 1
    print(f"profile of {args.scenario} {' '.join(sets)}\nraw: {raw}")
    print(summarize(raw, args.rate, args.versions, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
