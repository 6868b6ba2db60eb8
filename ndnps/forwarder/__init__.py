"""The forwarder program (python -m ndnps.forwarder; `python -m forwarder` is its alias).

Its per-packet core (HOT_MODULES, and the base's: ndnps.ndn.HOT_MODULES) is compiled with mypyc
at install (setup.py; again in place after an edit: `python -m forwarder.compile`); where no C
compiler is, it runs as pure Python, the reference. The build is used only while every source
it was built from is unchanged and NDNPS_PURE is unset (ndnps.ndn.native); otherwise the sources
are imported, with a warning if the build is stale, so an edit can never run old compiled
rules.
"""
from __future__ import annotations

from ndnps.ndn import COMPILED as _BASE_COMPILED
from ndnps.ndn.native import PURE_ENV, guard

__all__ = ["HOT_MODULES", "PURE_ENV", "USE_COMPILED", "core_build"]

# The modules on the per-packet path; nothing with I/O (faces, daemon, mgmt) is compiled.
HOT_MODULES = (
    "ndnps.forwarder.face_table", "ndnps.forwarder.strategy", "ndnps.forwarder.outgoing",
    "ndnps.forwarder.incoming", "ndnps.forwarder.pipelines",
    "ndnps.forwarder.tracer", "ndnps.forwarder.tables.prefix_table", "ndnps.forwarder.tables.fib",
    "ndnps.forwarder.tables.pit", "ndnps.forwarder.tables.cs",
    "ndnps.forwarder.tables.dead_nonce_list", "ndnps.forwarder.tables.strategy_choice",
    "ndnps.forwarder.tables.persistent_pit", "ndnps.forwarder.faces.queue",
    "ndnps.forwarder.internal_face", "ndnps.forwarder.aggregator",
    "ndnps.forwarder.tables.aggregator_pool",
)
USE_COMPILED = guard(HOT_MODULES) and _BASE_COMPILED


def core_build() -> str:
    """'mypyc' if the loaded core is the compiled one, else 'python' (for logs and benches)."""
    from . import pipelines
    return "python" if (pipelines.__file__ or "").endswith(".py") else "mypyc"
