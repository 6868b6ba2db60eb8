"""The mypyc build of the per-packet modules (made at install by setup.py, again in place by
`python -m forwarder.compile`): what keeps it honest. The extension modules lie beside their
sources; the build is used only while every source it was built from is unchanged (MANIFEST
holds their hashes) and NDNPS_PURE is unset — all of it or none: the modules of one mypyc group
call each other directly. Otherwise `guard` puts a finder first that imports those modules from
their .py files, with a warning if the build is stale, so an edit can never run old compiled
rules. Each package with compiled modules guards its own (in its __init__)."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import warnings
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Final

PURE_ENV: Final = "NDNPS_PURE"
OLD_PURE_ENV: Final = "NDNPS_FORWARDER_PURE"     # its earlier name, still honoured
MANIFEST: Final = Path(__file__).with_name("_compiled.txt")
GROUP: Final = "ndnps.ndn.core"          # mypyc's shared library: ndnps/ndn/core__mypyc*.so
ROOT: Final = Path(__file__).resolve().parents[2]


def source_path(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def source_digest(module: str) -> str:
    return hashlib.sha256(source_path(module).read_bytes()).hexdigest()


def _unchanged(module: str, digest: str) -> bool:
    try:
        return source_digest(module) == digest
    except OSError:
        return False


def build_present() -> bool:
    return MANIFEST.exists() or any(MANIFEST.parent.glob("core__mypyc*"))


class _SourcesFirst:
    """Meta-path finder: the guarded modules from their .py files, even if a compiled
    extension module lies beside them (which the default finder would prefer)."""

    def __init__(self) -> None:
        self.modules: set[str] = set()

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if name not in self.modules:
            return None
        return importlib.util.spec_from_file_location(name, source_path(name))


def _finder() -> _SourcesFirst:
    for f in sys.meta_path:
        if isinstance(f, _SourcesFirst):
            return f
    f = _SourcesFirst()
    sys.meta_path.insert(0, f)
    return f


_verdict: dict[str, bool] = {}        # the manifest's, once per process: "usable"


def usable(modules: tuple[str, ...]) -> bool:
    """Whether the build of `modules` may run: present, unchanged, not turned off."""
    if os.environ.get(PURE_ENV) or os.environ.get(OLD_PURE_ENV):
        return False
    try:
        recorded = dict(line.split() for line in MANIFEST.read_text().splitlines() if line)
    except (OSError, ValueError):
        return False
    if any(m not in recorded for m in modules):
        return False                        # built before these modules were compiled
    if "usable" not in _verdict:
        stale = [m for m in recorded if not _unchanged(m, recorded[m])]
        _verdict["usable"] = not stale
        if stale:
            warnings.warn(f"the compiled core is stale ({', '.join(stale)} changed since it was "
                          "built); running the Python sources. Rebuild with `python -m "
                          "forwarder.compile` (or `pip install -e .`), or remove it with "
                          "`python -m forwarder.compile --clean`.", RuntimeWarning, stacklevel=3)
    return _verdict["usable"]


def guard(modules: tuple[str, ...]) -> bool:
    """Use the build of `modules` if it may run, else their sources; True if compiled. Only
    with a build in the tree is a finder installed: the default import machinery takes the
    sources when there is none, and a finder of ours first would hide them from import hooks
    such as atheris.instrument_imports (the fuzzer's coverage)."""
    if usable(modules):
        return True
    if build_present():
        _finder().modules.update(modules)
    return False
