"""The house's arrows point down only (DESIGN.md): the forwarder stands on the NDN base alone,
the base on nothing above it, and nothing imports apps/. Checked on the code itself: what
`import forwarder.pipelines` loads, and every module's imports (read with ast)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_forwarder_core_loads_neither_python_ndn_nor_asyncio():
    probe = "import sys, forwarder.pipelines; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=60).stdout.split()
    assert "asyncio" not in out
    assert not [m for m in out if m == "ndn" or m.startswith("ndn.")]       # python-ndn
    assert [m for m in out if m.startswith("ndnps")] == \
        [m for m in out if m == "ndnps" or m.startswith("ndnps.ndn")]


def imports(path: Path) -> set[str]:
    """The absolute modules a file imports (relative imports resolved)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found |= {base} | {f"{base}.{a.name}" for a in node.names}
    return found


def modules(folder: str) -> dict[Path, set[str]]:
    return {p: imports(p) for p in sorted((ROOT / folder).rglob("*.py"))}


def test_the_forwarder_imports_nothing_of_ndnps_but_the_base():
    for path, names in modules("forwarder").items():
        wrong = {n for n in names if n.startswith("ndnps") and n != "ndnps"
                 and not n.startswith("ndnps.ndn")}
        assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"


def test_the_base_imports_nothing_above_it():
    for path, names in modules("ndnps/ndn").items():
        wrong = {n for n in names if n.split(".")[0] in ("forwarder", "apps", "asyncio", "ndn")
                 or (n.startswith("ndnps") and n != "ndnps" and not n.startswith("ndnps.ndn"))}
        assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"


def test_nothing_imports_apps():
    for folder in ("forwarder", "ndnps"):
        for path, names in modules(folder).items():
            wrong = {n for n in names if n == "apps" or n.startswith("apps.")}
            assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"
