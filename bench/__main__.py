"""python -m bench [NAME [ARGS...]]   run every registered benchmark, or one by name
python -m bench --list              list them"""
from __future__ import annotations

import importlib
import sys

from . import BENCHMARKS


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        print("benchmarks:", ", ".join(BENCHMARKS))
        return 0
    if argv[:1] == ["--list"]:
        print("\n".join(BENCHMARKS))
        return 0
    if argv:
        name, rest = argv[0], argv[1:]
        if name not in BENCHMARKS:
            print(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}", file=sys.stderr)
            return 2
        return importlib.import_module(BENCHMARKS[name]).main(rest)
    worst = 0
    for name, module in BENCHMARKS.items():
        print(f"== {name}", file=sys.stderr, flush=True)
        worst = max(worst, importlib.import_module(module).main([]))
    return worst


if __name__ == "__main__":
    sys.exit(main())
