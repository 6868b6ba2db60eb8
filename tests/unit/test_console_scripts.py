"""Every program has a console script (pyproject.toml [project.scripts]) that runs the same
`main` as its `python -m` form, and the README names it."""
from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = {   # python -m module -> its console script (`forwarder`: ndnps.forwarder's alias)
    "ndnps.scenario": "ndnps-scenario", "ndnps.forwarder": "ndnps-fwd", "forwarder": "ndnps-fwd",
    "ndnps.apps.ps": "ndnps-ps", "ndnps.apps.worker": "ndnps-worker",
    "ndnps.apps.peer": "ndnps-peer", "ndnps.apps.stage": "ndnps-stage",
    "ndnps.apps.controller": "ndnps-controller", "ndnps.planner": "ndnps-planner",
    "ndnps.placement": "ndnps-placement", "ndnps.train": "ndnps-train",
    "ndnps.demo": "ndnps-demo"}


def scripts() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def test_every_program_has_a_console_script_whose_target_is_its_main():
    declared = scripts()
    assert set(PROGRAMS.values()) <= set(declared), set(PROGRAMS.values()) - set(declared)
    for module, script in PROGRAMS.items():
        target, _, attr = declared[script].partition(":")
        entry = getattr(importlib.import_module(target), attr)
        # `python -m module` runs the same function
        main_module = importlib.import_module(f"{module}.__main__"
                                              if (ROOT / module.replace(".", "/")).is_dir()
                                              else module)
        assert getattr(main_module, "main") is entry, (module, script)


def test_the_readme_names_every_console_script():
    readme = (ROOT / "README.md").read_text()
    missing = [s for s in PROGRAMS.values() if f"`{s}`" not in readme]
    assert not missing, missing


def test_the_demos_help_prints_help_and_starts_nothing(monkeypatch, capsys):
    from ndnps.lab import demo

    def started(*args, **kwargs):
        raise AssertionError("--help started the demo")
    monkeypatch.setattr(demo, "start_forwarder", started)
    with pytest.raises(SystemExit) as exit_:
        demo.main(["--help"])
    assert exit_.value.code == 0 and "usage: python -m ndnps.demo" in capsys.readouterr().out
