"""Run a module's main under cProfile, from outside it (no profiling code in the forwarder):

    python -m bench.cprofile_main OUT.prof forwarder [forwarder flags...]

The stats are dumped when the program returns (the forwarder returns on SIGTERM)."""
from __future__ import annotations

import cProfile
import runpy
import sys


def main() -> int:
    out, module, *rest = sys.argv[1:]
    sys.argv = [module, *rest]
    prof = cProfile.Profile()
    prof.enable()
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    finally:
        prof.disable()
        prof.dump_stats(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
