"""Build hook: the per-packet modules compiled with mypyc at install, pure Python where it can't.

`pip install -e .` (and `pip install .`) compile every package's HOT_MODULES (read from the
package's `__init__.py`, the one place each list lives) into one mypyc group beside their
sources, and record their hashes in ndnps/ndn/_compiled.txt: ndnps.ndn.native uses the build
only while every source is unchanged. Without mypyc or a C compiler the install goes on and
says once that it runs pure Python; the sources are the reference either way.
NDNPS_PURE=1 at install skips the build.
"""
from __future__ import annotations

import ast
import hashlib
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
# whose HOT_MODULES are compiled
PACKAGES = ("ndnps/ndn", "ndnps/client", "ndnps/exchanges/transport", "ndnps/protocol",
            "ndnps/forwarder")
GROUP = "ndnps.ndn.core"                 # mypyc's shared library (ndnps.ndn.native.GROUP)
MANIFEST = Path("ndnps") / "ndn" / "_compiled.txt"


def hot_modules() -> list[str]:
    """Every package's `HOT_MODULES = (...)`, read without importing it."""
    found: list[str] = []
    for pkg in PACKAGES:
        init = ROOT / pkg / "__init__.py"
        if not init.exists():
            continue
        for node in ast.parse(init.read_text()).body:
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "HOT_MODULES" for t in node.targets):
                found += list(ast.literal_eval(node.value))
    return found


def source(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def say(text: str) -> None:
    # pip shows a build's output only with -v: stderr of a PEP 517 hook reaches the user in
    # pip's own failure output alone, so the line also goes to the terminal when there is one
    print(f"ndnps: {text}", file=sys.stderr, flush=True)
    try:
        with open("/dev/tty", "w") as tty:
            tty.write(f"ndnps: {text}\n")
    except OSError:
        pass


class BuildCompiled(build_ext):
    """build_ext that falls back to pure Python (no extension) when compiling fails, and
    writes the manifest of what it compiled beside the built modules."""

    def build_extension(self, ext: Extension) -> None:
        if ext.name not in HELPERS:
            super().build_extension(ext)
            return
        try:                        # a helper on its own: without it, its Python fallback
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001 - any compiler failure: the fallback
            say(f"{ext.name} not built ({_first_line(e)}): its Python fallback runs")

    def run(self) -> None:
        if not self.extensions:
            return
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - any compiler failure: pure Python instead
            self._remove_built()
            say(f"the compiled core could not be built ({_first_line(e)}); ndnps runs pure "
                "Python")
            return
        if not any(ext.name not in HELPERS for ext in self.extensions):
            return
        digests = {m: hashlib.sha256(source(m).read_bytes()).hexdigest() for m in MODULES}
        target = Path(self.get_ext_fullpath(MODULES[0])).parent
        (target / MANIFEST.name).write_text("".join(f"{m} {d}\n" for m, d in digests.items()))
        say(f"compiled {len(MODULES)} per-packet modules with mypyc")

    def _remove_built(self) -> None:
        for ext in self.extensions:
            path = Path(self.get_ext_fullpath(ext.name))
            if ext.name not in HELPERS and path.exists():
                path.unlink()


def _first_line(e: BaseException) -> str:
    first = (str(e).splitlines() or [""])[0]
    return f"{type(e).__name__}: {first[:160]}{'…' if len(first) > 160 else ''}"


# small C modules beside the compiled core, each with a Python fallback of its own
HELPERS = {"ndnps.ndn._mmsg": ["ndnps/ndn/_mmsg.c"]}      # batched datagram I/O (Linux)


def helpers() -> list[Extension]:
    if not sys.platform.startswith("linux"):
        return []
    return [Extension(name, sources, extra_compile_args=["-O2"])
            for name, sources in HELPERS.items()]


def extensions() -> list:
    if os.environ.get("NDNPS_PURE"):
        say("NDNPS_PURE is set: no compiled core; ndnps runs pure Python")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        say("mypyc is not available: no compiled core; ndnps runs pure Python")
        return []
    try:
        return mypycify(["--follow-imports=silent", "--ignore-missing-imports",
                         *(str(source(m).relative_to(ROOT)) for m in MODULES)],
                        opt_level="3", group_name=GROUP)
    except BaseException as e:  # noqa: BLE001 - mypyc exits on a type error: pure instead
        say(f"mypyc could not compile the core ({type(e).__name__}: {e}); "
            "ndnps runs pure Python")
        return []


MODULES = hot_modules()
setup(ext_modules=extensions() + ([] if os.environ.get("NDNPS_PURE") else helpers()),
      cmdclass={"build_ext": BuildCompiled})
