"""What every benchmark shares: results.json (merged by key), the revision measured, the
command line, the last JSON line, medians and ratios, interleaved rounds, source trees
alternated, metrics files read. Runs of the scenario runner read back into figures:
scenario_runs.py.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = Path(__file__).resolve().parent / "results.json"

def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def env() -> dict[str, str]:
    path = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYTHONPATH": os.pathsep.join(path)}


def revision() -> dict:
    """The commit measured, and whether the measured code (not bench/) had local changes.
    In an exported snapshot (`git archive`, no .git) NDNPS_BENCH_COMMIT names the commit."""
    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=str(ROOT), capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    commit = git("rev-parse", "--short", "HEAD")
    if not commit or not (ROOT / ".git").exists():
        return {"commit": os.environ.get("NDNPS_BENCH_COMMIT", "unknown"), "snapshot": True,
                "forwarder_dirty": False, "apps_dirty": False}
    return {"commit": commit,
            "forwarder_dirty": bool(git("status", "--porcelain", "--", "ndnps/forwarder",
                                        "forwarder")),
            "apps_dirty": bool(git("status", "--porcelain", "--", "ndnps",
                                   ":(exclude)ndnps/forwarder"))}


def stamp() -> dict:
    return {"revision": revision(), "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "cpus": os.cpu_count()}


def load_results(path: Path = RESULTS) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save(section: str, key: str | None, figures: dict, path: Path = RESULTS) -> None:
    """Merge `figures` into results.json under [section][key] (or [section] when key is None),
    keeping every other key."""
    data = load_results(path)
    if key is None:
        data[section] = figures
    else:
        sec = data.get(section)
        if not isinstance(sec, dict):
            sec = {}
        sec[key] = figures
        data[section] = sec
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def bench_parser(prog: str, doc: str, quick: str, rounds: int | None = None):
    """argparse for a benchmark: its own flags are added by the caller; these are shared:
    --quick (help: what it does), --keep DIR, --no-save and, when `rounds` is given, --rounds."""
    import argparse
    p = argparse.ArgumentParser(prog=prog, description=doc.split("\n")[0])
    p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument("--keep", type=Path, help="keep the run directories here")
    p.add_argument("--no-save", action="store_true", help="do not write bench/results.json")
    if rounds is not None:
        p.add_argument("--rounds", type=int, default=rounds, help=f"rounds (default {rounds})")
    return p


def parse_trees(spec: str, error: Callable[[str], Any],
                reserved: tuple[str, ...] = ()) -> dict[str, Path]:
    """The `--trees LABEL=DIR,...` flag's source trees; `error` (the argument parser's) for an
    item that is not a free label and the directory of a source tree."""
    trees: dict[str, Path] = {}
    for item in filter(None, spec.split(",")):
        label, sep, d = item.partition("=")
        if not sep or label in reserved or not (Path(d) / "forwarder" / "__main__.py").exists():
            error(f"--trees: {item!r} is not LABEL=DIR of a source tree")
        trees[label] = Path(d).resolve()
    return trees


def alternate_trees(trees: dict[str, Path], script: Path, argv: list[str],
                    rounds: int) -> dict[str, list[list[float]]]:
    """Run `script` (a file of this tree) with `argv` once per source tree and round, each
    tree's packages first on sys.path and its directory the working one, alternating between
    the trees round by round (the host's noise falls on all alike): per tree, the numbers on
    the last line each run printed.  The script runs with the other tree's `bench` package:
    in that mode it must import nothing from `bench`."""
    out: dict[str, list[list[float]]] = {label: [] for label in trees}
    for _ in range(rounds):
        for label, tree in trees.items():
            run_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(ROOT)])}
            code = (f"import runpy, sys; sys.argv = [{script.name!r}, *{argv!r}]; "
                    f"runpy.run_path({str(script.resolve())!r}, run_name='__main__')")
            run = subprocess.run([sys.executable, "-c", code], cwd=str(tree), env=run_env,
                                 capture_output=True, text=True)
            if run.returncode != 0:
                raise RuntimeError(f"{script.name} {' '.join(argv)} in {tree} failed "
                                   f"(exit {run.returncode}):\n{run.stderr[-2000:]}")
            out[label].append([float(x) for x in run.stdout.strip().splitlines()[-1].split()])
    return out


def emit(line: dict) -> None:
    """The one JSON line a benchmark prints last."""
    print(json.dumps(line), flush=True)


def median(xs: Iterable[float | None]) -> float | None:
    """None if no value (missing values are skipped)."""
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def mean(xs: Iterable[float | None]) -> float | None:
    """None if no value (missing values are skipped)."""
    vals = [x for x in xs if x is not None]
    return statistics.fmean(vals) if vals else None


def rnd(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def interleave(configs: list[str], rounds: int, run: Callable[[str, str], Any],
               attempts: int = 2) -> dict[str, list[Any]]:
    """Run every config once per round, alternating (A B C A B C ...), so the noise of a shared
    host falls on all alike; one retry per failed run. `run(config, tag)`: tag is unique per
    call ("r0", "r0-retry1", ...), e.g. for a run directory."""
    out: dict[str, list[Any]] = {c: [] for c in configs}
    for r in range(rounds):
        for c in configs:
            for attempt in range(attempts):
                try:
                    out[c].append(run(c, f"r{r}" + (f"-retry{attempt}" if attempt else "")))
                    break
                except Exception as e:                      # noqa: BLE001 - reported
                    log(f"round {r + 1} {c}: run failed ({e}); "
                        f"{'retrying' if attempt + 1 < attempts else 'giving up'}")
                    if attempt + 1 == attempts:
                        raise
    return out


def jsonl_records(path: Path) -> list[dict]:
    """The records of a metrics file that decode (a process killed mid-write leaves a bad
    line); none if it does not exist."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def fmt(x: Any, spec: str = ".3f") -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return format(x, spec)
    return str(x)
