"""Build (or remove) the optional mypyc-compiled forwarder core.

    pip install -e '.[compiled]'          # mypy (mypyc) and setuptools; needs a C compiler
    python -m forwarder.compile           # compile the hot modules in place
    python -m forwarder.compile --clean   # remove the build: back to pure Python

The hot modules are the base's (ndnps.ndn.HOT_MODULES: TLV, packets, link reliability, RTO)
and the forwarder's (forwarder.HOT_MODULES). Their extension modules land beside their
sources, with one shared library ndnps/ndn/core__mypyc*.so, and ndnps/ndn/_compiled.txt records
the hash of every source built; each package uses the build only while those hashes match
(ndnps.ndn.native). NDNPS_FORWARDER_PURE=1 runs the sources with a build present, e.g. to
compare the two.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from forwarder import HOT_MODULES as FORWARDER_MODULES
from ndnps.ndn import HOT_MODULES as BASE_MODULES
from ndnps.ndn.native import GROUP, MANIFEST, ROOT, source_digest, source_path

HOT_MODULES = BASE_MODULES + FORWARDER_MODULES

_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify
paths, target, group = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
sys.argv = [sys.argv[0], "build_ext", "--inplace", "--build-temp", target + "/temp",
            "--build-lib", target + "/lib"]
setup(name="forwarder-core", ext_modules=mypycify(paths, opt_level="3", target_dir=target,
                                                  group_name=group))
"""


def artifacts() -> list[Path]:
    """Every file a build leaves in the tree."""
    found = [MANIFEST] if MANIFEST.exists() else []
    for module in HOT_MODULES:
        src = source_path(module)
        found += sorted(src.parent.glob(src.stem + ".*.so")) + sorted(src.parent.glob(src.stem + ".*.pyd"))
    pkg = MANIFEST.parent
    found += sorted(pkg.glob("core__mypyc.*.so")) + sorted(pkg.glob("core__mypyc.*.pyd"))
    return found


def clean() -> list[Path]:
    gone = artifacts()
    for path in gone:
        path.unlink()
    return gone


def build(verbose: bool = False) -> list[Path]:
    try:
        import mypyc  # noqa: F401
    except ImportError:
        raise SystemExit("mypyc is not installed: pip install -e '.[compiled]'") from None
    clean()
    paths = ["--follow-imports=silent", "--ignore-missing-imports",
             *(str(source_path(m).relative_to(ROOT)) for m in HOT_MODULES)]
    digests = {m: source_digest(m) for m in HOT_MODULES}
    with tempfile.TemporaryDirectory(prefix="fwcompile-") as target:
        proc = subprocess.run([sys.executable, "-c", _SETUP, ",".join(paths), target, GROUP],
                              cwd=str(ROOT), capture_output=not verbose, text=True)
        if proc.returncode != 0:
            clean()
            raise SystemExit(f"mypyc build failed:\n{proc.stdout or ''}{proc.stderr or ''}")
    if {m: source_digest(m) for m in HOT_MODULES} != digests:
        clean()
        raise SystemExit("a source changed during the build; run it again")
    MANIFEST.write_text("".join(f"{m} {d}\n" for m, d in digests.items()))
    shutil.rmtree(ROOT / ".mypy_cache", ignore_errors=True)
    return artifacts()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m forwarder.compile", description=__doc__.split("\n")[0])
    p.add_argument("--clean", action="store_true", help="remove the compiled build")
    p.add_argument("--verbose", action="store_true", help="show the compiler's output")
    args = p.parse_args(argv)
    if args.clean:
        gone = clean()
        print(f"removed {len(gone)} files; the forwarder runs its Python sources")
        return 0
    made = build(args.verbose)
    print(f"compiled {len(HOT_MODULES)} modules ({len(made) - 1} files); "
          f"`python -m forwarder.compile --clean` removes them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
