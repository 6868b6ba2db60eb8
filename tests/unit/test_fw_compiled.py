"""The mypyc build of the per-packet core (made at install by setup.py; python -m
ndnps.forwarder.compile in place): used only while its sources are unchanged, all of it or none. The
suite runs against what is installed — compiled where a C compiler is, as in CI (.ci/pytest
sets NDNPS_EXPECT_COMPILED and runs a quick subset again with NDNPS_PURE=1)."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ndnps import forwarder, ndn
from ndnps.ndn import native

HOT_MODULES = ndn.HOT_MODULES + forwarder.HOT_MODULES

ROOT = Path(__file__).resolve().parent.parent.parent
PROBE = "from ndnps import forwarder; print(forwarder.USE_COMPILED, forwarder.core_build())"


def copy_tree(dst: Path) -> Path:
    """A copy of what the forwarder needs, without the build (a test never touches this tree)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "_compiled.txt")
    shutil.copytree(ROOT / "ndnps", dst / "ndnps", ignore=ignore)
    return dst


def run(tree: Path, *args: str, pure: bool = False,
        timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", forwarder.PURE_ENV)}
    env["PYTHONPATH"] = str(tree)
    if pure:
        env[forwarder.PURE_ENV] = "1"
    return subprocess.run([sys.executable, *args], cwd=str(tree), env=env, text=True,
                          capture_output=True, timeout=timeout)


def test_this_checkout_runs_its_sources_unless_built():
    for module in HOT_MODULES:
        mod = importlib.import_module(module)
        assert forwarder.USE_COMPILED or (mod.__file__ or "").endswith(".py"), module
    if not native.build_present():
        # nothing of ours on the import path: import hooks (atheris) see the sources
        assert not any(isinstance(f, native._SourcesFirst) for f in sys.meta_path)


def test_a_stale_build_is_ignored_with_a_warning(tmp_path):
    tree = copy_tree(tmp_path)
    # a build of other sources: one digest differs from the file on disk
    (tree / "ndnps" / "ndn" / "_compiled.txt").write_text("".join(
        f"{m} {'0' * 64 if m == 'ndnps.forwarder.tables.pit' else native.source_digest(m)}\n"
        for m in HOT_MODULES))
    out = run(tree, "-c", PROBE)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "python"]
    assert "stale" in out.stderr and "ndnps.forwarder.tables.pit" in out.stderr


def test_the_installed_core_is_compiled_where_ci_expects_it():
    """CI installs with a C compiler and mypyc (the build requirement): the suite must run the
    compiled build, not silently the sources."""
    if not os.environ.get("NDNPS_EXPECT_COMPILED"):
        pytest.skip("NDNPS_EXPECT_COMPILED unset (.ci/pytest sets it)")
    if os.environ.get(native.PURE_ENV):
        assert not forwarder.USE_COMPILED and forwarder.core_build() == "python"
        return
    assert forwarder.USE_COMPILED and forwarder.core_build() == "mypyc"
    for module in HOT_MODULES:
        mod = importlib.import_module(module)
        assert not (mod.__file__ or "").endswith(".py"), module
    # and the pure sources answer for the same modules when asked (a separate process)
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                           env={**os.environ, native.PURE_ENV: "1"}, timeout=60)
    assert probe.stdout.split() == ["False", "python"], probe.stderr
