"""Profile the forwarder under the bench.forwarder load (not a registered benchmark).

    python -m bench.profile_forwarder [--tool py-spy|cprofile] [--size 8000] [--seconds 8]
                                      [--native] [--out DIR]

py-spy attaches to the running forwarder for the measured window (sampling, --nonblocking so
the forwarder is not paused) and writes collapsed stacks; this script prints the self time per
function and the inclusive time of the forwarder's own functions. cProfile runs the forwarder
through bench/cprofile_main.py (deterministic, slows the forwarder ~2x, shows call counts).
"""
from __future__ import annotations

import argparse
import collections
import pstats
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import ROOT
from bench.forwarder import run_once

PYSPY = Path(sys.executable).with_name("py-spy")


def summarize_collapsed(path: Path, top: int = 30) -> str:
    """Self and inclusive sample shares per frame from py-spy's raw (collapsed) output."""
    self_t: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    idle = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = [f.split(" (")[0] + " (" + f.split(" (")[1].split(":")[0].split("/")[-1] + ")"
                  if " (" in f else f for f in stack.split(";")]
        total += n
        if any("run_forever" in f for f in frames) and len(frames) <= 6 and \
                not any(("forwarder" in f) or ("faces" in f) for f in frames):
            idle += n
        self_t[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    lines = [f"samples: {total} (event loop idle/poll, no Python frame of ours: "
             f"{100 * idle / max(total, 1):.1f}%)", "", "self time (top):"]
    for f, n in self_t.most_common(top):
        lines.append(f"  {100 * n / total:5.1f}%  {f}")
    lines += ["", "inclusive time (top):"]
    for f, n in incl.most_common(top + 15):
        lines.append(f"  {100 * n / total:5.1f}%  {f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile_forwarder")
    p.add_argument("--tool", choices=["py-spy", "cprofile"], default="py-spy")
    p.add_argument("--size", type=int, default=8000)
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    p.add_argument("--native", action="store_true", help="py-spy: include C frames (uvloop)")
    p.add_argument("--out", default="", help="directory to keep the raw profile in")
    p.add_argument("--tree", default="",
                   help="profile the forwarder of this source tree instead (e.g. a compiled copy)")
    args = p.parse_args(argv)
    tree = Path(args.tree).resolve() if args.tree else ROOT
    out = Path(args.out or tempfile.mkdtemp(prefix="fwdbench-prof-"))
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="fwdbench-prof-run-"))
    warmup = 1.0
    try:
        if args.tool == "cprofile":
            prof = out / "forwarder.prof"
            res = run_once("fwd", workdir, args.size, args.window, args.seconds, warmup,
                           fwd_argv=[sys.executable, "-m", "bench.cprofile_main", str(prof),
                                     "forwarder"], tree=tree)
            print(f"under cProfile: {res['per_s']:.0f} exchanges/s, cpu {res['cpu']}")
            st = pstats.Stats(str(prof))
            st.sort_stats("tottime").print_stats(30)
            st.sort_stats("cumulative").print_stats(40)
            return 0
        raw = out / "forwarder.collapsed"
        spy: list[subprocess.Popen] = []

        def attach(pids: dict) -> None:
            cmd = [str(PYSPY), "record", "--pid", str(pids["server"]), "--format", "raw",
                   "--output", str(raw), "--rate", str(args.rate), "--duration",
                   str(int(args.seconds))]
            if args.native:
                cmd.append("--native")          # (py-spy cannot combine it with --nonblocking)
            else:
                cmd.append("--nonblocking")
            with open(out / "py-spy.log", "w") as log:
                spy.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))

        res = run_once("fwd", workdir, args.size, args.window, args.seconds + warmup, warmup,
                       on_measure=attach, tree=tree)
        for s in spy:
            s.wait(30)
        if not raw.exists():
            print((out / "py-spy.log").read_text(), file=sys.stderr)
            return 1
        print(f"under py-spy: {res['per_s']:.0f} exchanges/s, cpu {res['cpu']}")
        print(f"raw profile: {raw}")
        print(summarize_collapsed(raw))
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
