"""Build (or remove) the compiled per-packet core in place — what `pip install -e .` does
(setup.py), again after an edit made it stale.

    python -m forwarder.compile           # compile every package's HOT_MODULES with mypyc
    python -m forwarder.compile --clean   # remove the build: back to pure Python

The hot modules are the base's (ndnps.ndn.HOT_MODULES: TLV, packets, link reliability, RTO),
the client's (ndnps.client.HOT_MODULES) and the forwarder's (ndnps.forwarder.HOT_MODULES). Their
extension modules land beside their sources, with one shared library ndnps/ndn/core__mypyc*.so,
and ndnps/ndn/_compiled.txt records the hash of every source built; the build is used only
while those hashes match (ndnps.ndn.native). NDNPS_PURE=1 runs the sources with a build
present, e.g. to compare the two. Needs mypy (the test extra pins it) and a C compiler.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from ndnps.ndn.native import MANIFEST, ROOT

# where the build's extension modules lie: every one of them ours (no other extension lives
# in the tree)
BUILT_IN = ("ndnps",)


def compiled_modules() -> list[str]:
    """The modules the build in the tree covers (its manifest), or []."""
    try:
        return [line.split()[0] for line in MANIFEST.read_text().splitlines() if line]
    except OSError:
        return []


def artifacts() -> list[Path]:
    """Every file a build leaves in the tree."""
    found = [MANIFEST] if MANIFEST.exists() else []
    for top in BUILT_IN:
        found += sorted((ROOT / top).rglob("*.so")) + sorted((ROOT / top).rglob("*.pyd"))
    return found


def clean() -> list[Path]:
    gone = artifacts()
    for path in gone:
        path.unlink()
    return gone


def build(verbose: bool = False) -> list[Path]:
    """setup.py's build, in place: the same modules, group and manifest as the install's."""
    try:
        import mypyc  # noqa: F401
    except ImportError:
        raise SystemExit("mypyc is not installed: pip install -e '.[compiled]'") from None
    clean()
    proc = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"],
                          cwd=str(ROOT), capture_output=not verbose, text=True)
    shutil.rmtree(ROOT / ".mypy_cache", ignore_errors=True)
    if proc.returncode != 0 or not MANIFEST.exists():
        clean()
        raise SystemExit(f"mypyc build failed:\n{proc.stdout or ''}{proc.stderr or ''}")
    return artifacts()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m forwarder.compile", description=__doc__.split("\n")[0])
    p.add_argument("--clean", action="store_true", help="remove the compiled build")
    p.add_argument("--verbose", action="store_true", help="show the compiler's output")
    args = p.parse_args(argv)
    if args.clean:
        gone = clean()
        print(f"removed {len(gone)} files; ndnps runs its Python sources")
        return 0
    made = build(args.verbose)
    print(f"compiled {len(compiled_modules())} modules ({len(made) - 1} files); "
          f"`python -m forwarder.compile --clean` removes them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
