"""The house's arrows point down only (docs/architecture.md): the forwarder stands on the NDN base
alone, the base on nothing above it, nothing imports the programs (ndnps/apps/) and no program
another. Checked on the code itself: what `import ndnps.forwarder.pipelines` loads, and every
module's imports (read with ast)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_forwarder_core_loads_neither_python_ndn_nor_asyncio():
    probe = "import sys, ndnps.forwarder.pipelines; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=60).stdout.split()
    assert "asyncio" not in out
    assert not [m for m in out if m == "ndn" or m.startswith("ndn.")]       # python-ndn
    assert [m for m in out if m.startswith("ndnps") and not m.startswith("ndnps.forwarder")] \
        == [m for m in out if m == "ndnps" or m.startswith("ndnps.ndn")]


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
    for path, names in modules("ndnps/forwarder").items():
        wrong = {n for n in names if n.startswith("ndnps") and n != "ndnps"
                 and not n.startswith(("ndnps.ndn", "ndnps.forwarder"))}
        assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"


def test_the_base_imports_nothing_above_it():
    for path, names in modules("ndnps/ndn").items():
        wrong = {n for n in names if n.split(".")[0] in ("forwarder", "asyncio", "ndn")
                 or (n.startswith("ndnps") and n != "ndnps" and not n.startswith("ndnps.ndn"))}
        assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"


def test_nothing_imports_the_programs():
    for folder in ("forwarder", "ndnps"):
        for path, names in modules(folder).items():
            if path.is_relative_to(ROOT / "ndnps" / "apps"):
                continue
            wrong = {n for n in names if n == "ndnps.apps" or n.startswith("ndnps.apps.")}
            assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"


def test_a_program_imports_no_other_program_and_common_none():
    """ndnps/apps/<program>/ stands on ndnps/apps/common/ (and the library), never on another
    program; common on no program."""
    apps = ROOT / "ndnps" / "apps"
    programs = {p.name for p in apps.iterdir() if (p / "__main__.py").is_file()}
    assert programs == {"ps", "worker", "peer", "stage", "controller"}
    for path, names in modules("ndnps/apps").items():
        own = path.relative_to(apps).parts[0]
        used = {n.split(".")[2] for n in names if n.startswith("ndnps.apps.")}
        wrong = used & programs - {own}
        assert not wrong, f"{path.relative_to(ROOT)} imports the programs {sorted(wrong)}"


def test_nothing_imports_the_forwarder_alias():
    """forwarder/ is only `python -m forwarder`'s alias: no module imports it, and it holds no
    code of its own (a docstring, imports, the `__main__` guard)."""
    for folder in ("ndnps", "bench", "fuzz", "tests"):
        for path, names in modules(folder).items():
            wrong = {n for n in names if n == "forwarder" or n.startswith("forwarder.")}
            assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"
    for path in (ROOT / "forwarder").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            guard = isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
            docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            assert guard or docstring or isinstance(node, (ast.Import, ast.ImportFrom)), \
                f"{path.relative_to(ROOT)}:{node.lineno} is code of its own"


SUBPACKAGES = ("ndn", "client", "protocol", "exchanges", "ml", "lab", "placement", "planner",
               "forwarder", "apps", "sim")

# Who may import whom (docs/architecture.md's house): each unit stands only on the ones listed. The
# lab starts and configures forwarders, so it may read the forwarder's limits, strategies and
# status client; the forwarder never reads the lab.  The client runtime holds the asyncio adapters
# of sans-I/O exchanges (the fetcher drives exchanges.transport.fetch); never the reverse.
MAY_IMPORT = {
    "ndnps.ndn": set(),
    "ndnps.protocol": {"ndnps.ndn"},
    "ndnps.ml": {"ndnps.ndn"},
    "ndnps.placement": set(),                    # pure computation (numpy, scipy's HiGHS)
    "ndnps.planner": {"ndnps.ml", "ndnps.exchanges"},   # the model it profiles, the
    #                                              pipeline schedule it simulates
    "ndnps.client": {"ndnps.ndn", "ndnps.exchanges"},   # the exchanges' asyncio adapters
    "ndnps.exchanges": {"ndnps.ndn", "ndnps.protocol", "ndnps.ml"},
    # the lab places aggregators (placement) and plans pipelines (planner) before a run, and
    # runs a scenario in the simulator (its programs by module name, as `python -m` does)
    "ndnps.lab": {"ndnps.ndn", "ndnps.protocol", "ndnps.ml", "ndnps.placement", "ndnps.planner",
                  "ndnps.forwarder", "ndnps.sim"},
    "ndnps": {"ndnps.lab", "ndnps.ml"},          # the `python -m ndnps.<program>` entry points
    "ndnps.forwarder": {"ndnps.ndn"},
    "forwarder": {"ndnps.forwarder"},            # the alias of `python -m forwarder`
    "ndnps.apps": {f"ndnps.{s}" for s in SUBPACKAGES if s not in ("apps", "sim")},  # programs
    # the simulator: real forwarder cores (through the daemon) and the apps' client in one
    # process; the lab drives it, so it stands below the lab
    "ndnps.sim": {"ndnps.ndn", "ndnps.forwarder", "ndnps.client", "ndnps.protocol"},
}


def unit(module: str) -> str:
    """The unit of the house a module belongs to: a subpackage of ndnps, or a top package."""
    parts = module.split(".")
    if parts[0] == "ndnps" and len(parts) > 1 and parts[1] in SUBPACKAGES:
        return f"ndnps.{parts[1]}"
    return parts[0]


def arrows() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {u: set() for u in MAY_IMPORT}
    for folder in ("ndnps", "forwarder"):
        for path, names in modules(folder).items():
            source = unit(".".join(path.relative_to(ROOT).with_suffix("").parts))
            found[source] |= {unit(n) for n in names if unit(n) in MAY_IMPORT} - {source}
    return found


def test_each_subpackage_imports_only_what_it_stands_on():
    for source, targets in arrows().items():
        extra = targets - MAY_IMPORT[source]
        assert not extra, f"{source} imports {sorted(extra)}"


def test_no_import_cycle_between_packages():
    graph = arrows()
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"cycle: {' -> '.join(path + (node,))}"
        if node not in done:
            for target in graph[node]:
                visit(target, path + (node,))
            done.add(node)

    for node in graph:
        visit(node, ())


def test_the_apps_and_their_client_stand_on_our_ndn_base_not_python_ndn():
    """python-ndn is for the outside clients the interop tests run against our forwarder; the
    apps, their client, the exchanges and the protocol use ndnps.ndn alone."""
    for folder in ("ndnps/client", "ndnps/exchanges", "ndnps/protocol", "ndnps/apps"):
        for path, names in modules(folder).items():
            wrong = {n for n in names if n == "ndn" or n.startswith("ndn.")}
            assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"


def module_file(module: str) -> Path | None:
    """The file of this tree that is `module` (a .py, or a package's __init__.py)."""
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def file_imports(path: Path) -> set[Path]:
    """The files of this tree a file imports — at the top, in a function or under
    TYPE_CHECKING alike; `from p import m` counts m's file, not p's, when m is a module."""
    names = imports(path)
    found = set()
    for name in names:
        target = module_file(name)
        submodules = {module_file(n) for n in names if n.rpartition(".")[0] == name}
        if target is not None and not (target.name == "__init__.py" and submodules - {None}):
            found.add(target)
    return found - {path}


def package_cycles(folder: Path) -> list[list[str]]:
    """Loops of imports among the files directly in one package."""
    files = sorted(p for p in folder.glob("*.py"))
    graph = {p: {t for t in file_imports(p) if t.parent == folder} for p in files}
    cycles: list[list[str]] = []
    state: dict[Path, int] = {}          # 1: on the path, 2: done

    def visit(node: Path, path: list[Path]) -> None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                loop = path[path.index(target):] + [target]
                cycles.append([str(p.relative_to(ROOT)) for p in loop])
            elif target not in state:
                visit(target, path + [target])
        state[node] = 2

    for node in files:
        if node not in state:
            visit(node, [node])
    return cycles


def test_no_import_cycle_inside_any_package():
    """Within a package every file stands on the ones below it: no two files, nor a longer
    loop of them, import each other — not even in a function, nor for the type checker."""
    packages = sorted({p.parent for folder in ("ndnps", "forwarder")
                       for p in (ROOT / folder).rglob("*.py")})
    found = {str(pkg.relative_to(ROOT)): package_cycles(pkg) for pkg in packages}
    assert not {pkg: loops for pkg, loops in found.items() if loops}


def test_no_import_cycle_between_the_subpackages_of_any_package():
    """Within a package, its subpackages stand on one another one way only (the exchanges'
    transport under the PS's exchanges, the apps' common under the programs, the forwarder's
    tables and faces)."""
    found = {}
    for package in sorted({p.parent for p in (ROOT / "ndnps").rglob("__init__.py")}):
        subs = sorted(p for p in package.iterdir() if (p / "__init__.py").is_file())
        if len(subs) < 2:
            continue
        graph: dict[Path, set[Path]] = {sub: set() for sub in subs}
        for sub in subs:
            for path in sub.rglob("*.py"):
                graph[sub] |= {other for target in file_imports(path) for other in subs
                               if other != sub and target.is_relative_to(other)}
        loops = []
        state: dict[Path, int] = {}

        def visit(node: Path, path: list[Path]) -> None:
            state[node] = 1
            for target in sorted(graph[node]):
                if state.get(target) == 1:
                    loops.append([p.name for p in path[path.index(target):] + [target]])
                elif target not in state:
                    visit(target, path + [target])
            state[node] = 2

        for node in subs:
            if node not in state:
                visit(node, [node])
        if loops:
            found[str(package.relative_to(ROOT))] = loops
    assert not found


# Inside two packages, their parts stand on one another one way (checked file by file): the
# exchanges' transport under the PS's exchanges and nothing else; the Forwarder's layers
# outgoing < incoming < pipelines (a layer never reads one above it).
INNER = {
    "ndnps/exchanges": {"transport": set(), "ps": {"transport"}, "collectives": set(),
                        "sharing": set(), "pipeline": set()},
    "ndnps/forwarder": {"outgoing.py": set(), "incoming.py": {"outgoing.py"},
                        "pipelines.py": {"incoming.py", "outgoing.py"}},
}


def test_the_parts_of_the_exchanges_and_of_the_forwarder_stand_one_way():
    for package, rules in INNER.items():
        base = ROOT / package
        for part, allowed in rules.items():
            files = [base / part] if part.endswith(".py") else sorted((base / part).rglob("*.py"))
            for path in files:
                used = {other for target in file_imports(path) for other in rules
                        if other != part and target.is_relative_to(base / other)}
                wrong = used - allowed
                assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"
