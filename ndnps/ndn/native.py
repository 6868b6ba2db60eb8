"""The optional mypyc build of the per-packet modules (`python -m forwarder.compile`): what keeps
it honest. The extension modules lie beside their sources; a build is used only while every
source it was built from is unchanged (MANIFEST holds their hashes) and NDNPS_FORWARDER_PURE is
unset. Otherwise `guard` puts a finder first that imports those modules from their .py files,
with a warning if the build is stale, so an edit can never run old compiled rules. Each package
with compiled modules guards its own (this one in its __init__, the forwarder in its)."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import warnings
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Final

PURE_ENV: Final = "NDNPS_FORWARDER_PURE"
MANIFEST: Final = Path(__file__).with_name("_compiled.txt")
GROUP: Final = "ndnps.ndn.core"          # mypyc's shared library: ndnps/ndn/core__mypyc*.so
ROOT: Final = Path(__file__).resolve().parents[2]


def source_path(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def source_digest(module: str) -> str:
    return hashlib.sha256(source_path(module).read_bytes()).hexdigest()


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


def usable(modules: tuple[str, ...]) -> bool:
    """Whether the build of `modules` may run: present, unchanged, not turned off."""
    if os.environ.get(PURE_ENV):
        return False
    try:
        recorded = dict(line.split() for line in MANIFEST.read_text().splitlines() if line)
    except (OSError, ValueError):
        return False
    stale = [m for m in modules if recorded.get(m) != source_digest(m)]
    if stale:
        warnings.warn(f"the compiled core is stale ({', '.join(stale)} changed since it was "
                      "built); running the Python sources. Rebuild with `python -m "
                      "forwarder.compile` or remove it with --clean.", RuntimeWarning,
                      stacklevel=3)
        return False
    return True


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
