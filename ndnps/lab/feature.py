"""The shape of a synchronisation method in the lab (in-network aggregation, time-division
sharing, the heterogeneous pipeline, PS-less collectives, the TCP baseline, several jobs): one
module each, whose `Feature` subclass the table in ndnps.lab.features names. The spec, the
runner, the report and the final table call these hooks on every feature (the scenario's
tables) or on the features a scenario uses (`active`), and know no method by name.

A hook's default does nothing, so a feature says only what it changes."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol

if TYPE_CHECKING:
    from ndnps.protocol.config import TrainingSpec

    from .config import Scenario
    from .process import ManagedProcess
    from .topology import AppNode, Plan

Rows = list[tuple[str, object]]
# one management command at a forwarder (its name): (status code, status text); the runner's
# goes over the forwarder's socket, a simulated run's to its management in-process
Command = Callable[[Any], tuple[int, str]]


class Launcher(Protocol):
    """What the runner lends a feature that starts processes."""
    sc: "Scenario"
    run_dir: Path
    sockets: dict[str, str]          # forwarder -> its unix socket
    roles: dict[str, str]            # app -> its role

    def spawn(self, name: str, argv: list[str],
              env: dict[str, str] | None = None) -> "ManagedProcess": ...

    def wrap(self, node: Any) -> list[str]: ...

    def link_flags(self) -> list[str]: ...

    def wait_ready(self, proc: "ManagedProcess", text: str) -> None:
        """Until `text` is in `proc`'s last log lines (READY_TIMEOUT)."""

    def address_of(self, host: str) -> str: ...


class Helper(NamedTuple):
    """A process a feature runs beside the apps (the share controller): its exit is recorded
    once, with `on_exit` as what follows, and the run goes on."""
    proc: "ManagedProcess"
    role: str
    node: str
    on_exit: str


class Launch(NamedTuple):
    """An app's program: its role in the run and `python -m` arguments before the common
    ones (--name, --config, --metrics)."""
    role: str
    program: list[str]


class Feature:
    name = ""
    tables: tuple[str, ...] = ()     # the scenario's top-level tables it reads
    draws_loss = False               # its `plot` draws the loss and accuracy (not the PS's)

    def active(self, sc: "Scenario") -> bool:
        """Whether the scenario uses it (the run's and the report's hooks are called then)."""
        return False

    # ---- the scenario (called on every feature, in the table's order) -----------------------

    def training(self, doc: dict[str, Any], sc: "Scenario",
                 table: dict[str, Any]) -> dict[str, Any]:
        """[training] before it is read: what the method sets or defaults in it."""
        return table

    def job_defaults(self, doc: dict[str, Any], sc: "Scenario") -> dict[str, Any]:
        """What every job's table gets before its own keys ([training] and [[jobs]])."""
        return {}

    def parse(self, doc: dict[str, Any], sc: "Scenario") -> None:
        """Its tables read and the scenario checked, once every job is read."""

    def check_host(self, sc: "Scenario") -> None:
        """Before anything runs: what this host or this mode cannot do (ScenarioError)."""

    # ---- the run (the features the scenario uses) -------------------------------------------

    def document(self, sc: "Scenario", doc: dict[str, Any]) -> None:
        """scenario.toml as run: its tables as resolved."""

    def prepare(self, sc: "Scenario", run_dir: Path) -> list[str]:
        """Before the topology is planned (a placement, a plan); the run's notes."""
        return []

    def routes(self, sc: "Scenario", plan: "Plan") -> None:
        """Its routes on the planned topology."""

    def aggregators(self, sc: "Scenario") -> list[str] | None:
        """The forwarders that aggregate for it (None: it has no say)."""
        return None

    def configure(self, sc: "Scenario", name: str, send: Command) -> bool:
        """Configure aggregator `name` by `send`ing it commands; False: not its to
        configure."""
        return False

    def launch(self, runner: Launcher, plan: "Plan") -> tuple[dict, dict] | None:
        """Start whatever trains in ndnps's stead: (PSs, workers) by name; None: ndnps."""
        return None

    def helpers(self, runner: Launcher) -> list[Helper]:
        """Processes it starts once the forwarders are up, before the apps."""
        return []

    def program(self, sc: "Scenario", run_dir: Path, app: "AppNode") -> Launch | None:
        """The program of a non-PS app of its job (None: not its app)."""
        return None

    def loss_policy(self, job: "TrainingSpec", name: str, role: str) -> str | None:
        """What its job does when app `name` (of `role`) exits unplanned."""
        return None

    # ---- the report -------------------------------------------------------------------------

    def summarize(self, run_dir: Path, sc: "Scenario", summary: dict[str, Any],
                  wall_seconds: float) -> None:
        """Its block of summary.json, and the top-level figures it stands for."""

    def rows(self, summary: dict[str, Any], rows: Rows) -> Rows:
        """The final table's rows: the PS run's, or what the method promises instead."""
        return rows

    def plot(self, run_dir: Path, sc: "Scenario", plots: Path) -> list[Path]:
        """Its own plots."""
        return []
