"""python -m bench [--quick]            run every registered benchmark, then print the table
python -m bench NAME [ARGS...]      run one, with its own flags (python -m bench NAME --help)
python -m bench --list              list them
python -m bench --table [--markdown]  the table of bench/results.json as it stands

Every benchmark writes its figures into bench/results.json (merged by key) and prints one JSON
line last; the table gives each figure, its ratio and its target. The
micro-benchmarks (python -m bench.micro.apps | faces | pipeline) are for optimisation work and
not registered here."""
from __future__ import annotations

import importlib
import sys
import time

from . import BENCHMARKS
from .common import RESULTS, load_results

HEADER = ("benchmark", "measure", "figure", "target", "verdict")


def table_rows(results: dict) -> list[tuple[str, ...]]:
    out = []
    for name, module in BENCHMARKS.items():
        sec = results.get(name)
        if not sec:
            continue
        mod = importlib.import_module(module)
        for row in getattr(mod, "rows", lambda s: [])(sec):
            out.append((name, *row))
    return out


def render(rows: list[tuple[str, ...]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [min(60, max(len(h), *(len(r[i]) for r in rows))) if rows else len(h)
              for i, h in enumerate(HEADER)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEADER, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        print("benchmarks:", ", ".join(BENCHMARKS))
        return 0
    if argv[:1] == ["--list"]:
        print("\n".join(BENCHMARKS))
        return 0
    if argv[:1] == ["--table"]:
        print(render(table_rows(load_results(RESULTS)), "--markdown" in argv))
        return 0
    if argv and not argv[0].startswith("-"):
        name, rest = argv[0], argv[1:]
        if name not in BENCHMARKS:
            print(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}", file=sys.stderr)
            return 2
        return importlib.import_module(BENCHMARKS[name]).main(rest)
    extra = ["--quick"] if "--quick" in argv else []
    worst = 0
    for name, module in BENCHMARKS.items():
        t0 = time.monotonic()
        print(f"== {name}", file=sys.stderr, flush=True)
        try:
            code = importlib.import_module(module).main(list(extra))
        except Exception as e:                       # noqa: BLE001 - the others still run
            print(f"== {name} failed: {e!r}", file=sys.stderr, flush=True)
            code = 1
        print(f"== {name}: {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
        worst = max(worst, code)
    print(render(table_rows(load_results(RESULTS)), markdown=False))
    return worst


if __name__ == "__main__":
    sys.exit(main())
