"""The forwarder program (python -m forwarder).

Its per-packet core (HOT_MODULES) may be compiled with mypyc, optionally:
`python -m forwarder.compile` (needs `pip install -e '.[compiled]'` and a C compiler). The
pure-Python modules stay the reference and the default. A compiled build is used only while
every source it was built from is unchanged (forwarder/_compiled.txt holds their hashes) and
NDNPS_FORWARDER_PURE is unset; otherwise the sources are imported, with a warning if the build
is stale, so an edit can never run old compiled rules.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import warnings
from importlib.machinery import ModuleSpec
from pathlib import Path

# The modules on the per-packet path; nothing with I/O (faces, daemon, mgmt) is compiled.
HOT_MODULES = (
    "forwarder.tlv", "forwarder.packet", "forwarder.face_table", "forwarder.strategy",
    "forwarder.pipelines", "forwarder.tracer", "forwarder.tables.prefix_table",
    "forwarder.tables.fib", "forwarder.tables.pit", "forwarder.tables.cs",
    "forwarder.tables.dead_nonce_list", "forwarder.tables.strategy_choice",
    "forwarder.tables.persistent_pit", "forwarder.rto", "forwarder.faces.reliability",
)
MANIFEST = Path(__file__).with_name("_compiled.txt")
PURE_ENV = "NDNPS_FORWARDER_PURE"
_ROOT = Path(__file__).resolve().parent.parent


def source_path(module: str) -> Path:
    return _ROOT.joinpath(*module.split(".")).with_suffix(".py")


def source_digest(module: str) -> str:
    return hashlib.sha256(source_path(module).read_bytes()).hexdigest()


def _compiled_build_usable() -> bool:
    if os.environ.get(PURE_ENV):
        return False
    try:
        recorded = dict(line.split() for line in MANIFEST.read_text().splitlines() if line)
    except (OSError, ValueError):
        return False
    stale = [m for m in HOT_MODULES if recorded.get(m) != source_digest(m)]
    if stale:
        warnings.warn(f"forwarder: the compiled core is stale ({', '.join(stale)} changed "
                      "since it was built); running the Python sources. Rebuild with "
                      "`python -m forwarder.compile` or remove it with --clean.",
                      RuntimeWarning, stacklevel=2)
        return False
    return True


class _SourcesFirst:
    """Meta-path finder: the hot modules from their .py files, even if a compiled extension
    module lies beside them (which the default finder would prefer)."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if name not in HOT_MODULES:
            return None
        return importlib.util.spec_from_file_location(name, source_path(name))


def _build_present() -> bool:
    return MANIFEST.exists() or any(Path(__file__).parent.glob("core__mypyc*"))


USE_COMPILED = _compiled_build_usable()
# Only with a build in the tree: the default import machinery already takes the sources when
# there is none, and a finder of ours first would hide them from import hooks such as
# atheris.instrument_imports (the fuzzer's coverage).
if not USE_COMPILED and _build_present() and \
        not any(isinstance(f, _SourcesFirst) for f in sys.meta_path):
    sys.meta_path.insert(0, _SourcesFirst())


def core_build() -> str:
    """'mypyc' if the loaded core is the compiled one, else 'python' (for logs and benches)."""
    from . import pipelines
    return "python" if (pipelines.__file__ or "").endswith(".py") else "mypyc"
