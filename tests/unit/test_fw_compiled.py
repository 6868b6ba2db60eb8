"""The optional mypyc build of the forwarder core (python -m forwarder.compile): used only while
its sources are unchanged, and behaving exactly as the sources — the forwarder's unit tests and
its process-level tests pass against both, in one copy of the tree."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import forwarder
from forwarder.compile import HOT_MODULES
from ndnps.ndn import native

ROOT = Path(__file__).resolve().parent.parent.parent
PROBE = "import forwarder; print(forwarder.USE_COMPILED, forwarder.core_build())"


def copy_tree(dst: Path, with_tests: bool = False) -> Path:
    """A copy of what the forwarder and its tests need (a build never touches this tree)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "_compiled.txt")
    for d in ("forwarder", "ndnps", "fuzz"):
        shutil.copytree(ROOT / d, dst / d, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", dst)
    if with_tests:
        (dst / "tests" / "unit").mkdir(parents=True)
        (dst / "tests" / "integration").mkdir()
        shutil.copy(ROOT / "tests" / "conftest.py", dst / "tests")
        shutil.copytree(ROOT / "tests" / "support", dst / "tests" / "support", ignore=ignore)
        for f in (ROOT / "tests" / "unit").glob("test_fw_*.py"):
            if f != Path(__file__):
                shutil.copy(f, dst / "tests" / "unit")
        for name in ("test_forwarder_pyndn.py", "test_bad_input.py",
                     "test_link_reliability.py"):
            shutil.copy(ROOT / "tests" / "integration" / name, dst / "tests" / "integration")
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
        f"{m} {'0' * 64 if m == 'forwarder.tables.pit' else native.source_digest(m)}\n"
        for m in HOT_MODULES))
    out = run(tree, "-c", PROBE)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "python"]
    assert "stale" in out.stderr and "forwarder.tables.pit" in out.stderr


def _have_compiler() -> bool:
    return importlib.util.find_spec("mypyc") is not None and \
        any(shutil.which(cc) for cc in ("cc", "gcc", "clang"))


@pytest.mark.slow
@pytest.mark.skipif(not _have_compiler(), reason="mypyc or a C compiler is missing "
                    "(pip install -e '.[compiled]')")
def test_compiled_core_passes_the_forwarder_tests(tmp_path):
    tree = copy_tree(tmp_path, with_tests=True)
    built = run(tree, "-m", "forwarder.compile", timeout=900)
    assert built.returncode == 0, built.stdout + built.stderr
    assert run(tree, "-c", PROBE).stdout.split() == ["True", "mypyc"]
    assert run(tree, "-c", PROBE, pure=True).stdout.split() == ["False", "python"]
    # the link reliability is in the build, and the apps import it too (python-ndn hands them
    # bytearray packets: the compiled module checks argument types)
    tests = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit",
             "tests/integration/test_forwarder_pyndn.py", "tests/integration/test_bad_input.py",
             "tests/integration/test_link_reliability.py"]
    for pure in (False, True):
        res = run(tree, *tests, pure=pure, timeout=900)
        assert res.returncode == 0, f"pure={pure}\n{res.stdout[-4000:]}\n{res.stderr[-2000:]}"
    # a source edited after the build: the sources run, not the old compiled rules
    pit = tree / "forwarder" / "tables" / "pit.py"
    pit.write_text(pit.read_text() + "\n# edited\n")
    assert run(tree, "-c", PROBE).stdout.split() == ["False", "python"]
    cleaned = run(tree, "-m", "forwarder.compile", "--clean")
    assert cleaned.returncode == 0 and not list((tree / "forwarder").rglob("*.so"))
