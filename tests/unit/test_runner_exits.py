"""The runner's policy for children that exit unasked (ndnps/lab/scenario.py, "Unplanned exits"),
on real short-lived processes: recorded with their log tails, then the job's policy — a
worker's loss is the PS's to handle, a forwarder and a checkpointing PS are restarted (a
bounded number of times), a PS that says the training cannot go on fails the run;
`on_child_exit = "fail"` fails it at the first one."""
from __future__ import annotations

import sys

import pytest

from ndnps.lab import share, spec
from ndnps.lab.process import ManagedProcess, ProcessFailed
from ndnps.lab.exitcodes import JobStopped, RunFailed, failed_run_exit
from ndnps.lab.faults import Faults
from ndnps.lab.progress import Progress
from ndnps.lab.runner import Runner

pytestmark = pytest.mark.timeout(30)


def exited(tmp_path, name: str, code: int) -> ManagedProcess:
    """A real process that says a line and exits with `code` (negative: killed by -code)."""
    prog = (f"import os, signal; print('{name} said this'); os.kill(os.getpid(), {-code})"
            if code < 0 else f"import sys; print('{name} said this'); sys.exit({code})")
    proc = ManagedProcess(name, [sys.executable, "-c", prog], tmp_path / f"{name}.log")
    proc.proc.wait(10)
    return proc


def running(tmp_path, name: str) -> ManagedProcess:
    return ManagedProcess(name, [sys.executable, "-c", "import time; time.sleep(60)"],
                          tmp_path / f"{name}.log")


@pytest.fixture
def setup(tmp_path):
    made: list[ManagedProcess] = []

    def make(*sets: str, ps: ManagedProcess | None = None,
             workers: dict[str, ManagedProcess] | None = None,
             forwarders: dict[str, ManagedProcess] | None = None,
             scenario: str = "sync-sgd", peers: dict[str, ManagedProcess] | None = None,
             role: str = "peer"):
        sc = spec.load(scenario, list(sets))
        runner = Runner(sc, tmp_path / "run", live=False)
        workers = workers if workers is not None else {}
        runner.forwarder_procs.update(forwarders or {})
        if peers is None:                               # a PS's job
            deciding = {"ps": ps or running(tmp_path, "ps")}
            runner.roles.update({"ps": "ps", **{w: "worker" for w in workers}})
        else:                                           # PS-less: peers or a pipeline's stages
            deciding = peers
            runner.roles.update({name: role for name in peers})
        made.extend([*deciding.values(), *workers.values(), *(forwarders or {}).values()])
        faults = Faults(runner, workers, Progress(sc, tmp_path / "run", False), runner.t0,
                        deciding)
        return runner, faults
    yield make
    for proc in made:
        proc.stop(grace=1)


def test_a_dead_worker_is_recorded_with_its_log_tail_and_left_to_the_ps(tmp_path, setup):
    runner, faults = setup(workers={"w2": exited(tmp_path, "w2", -9),
                                    "w1": running(tmp_path, "w1")})
    assert runner.check_exits(faults) is False
    (rec,) = runner.unplanned_exits
    assert (rec["who"], rec["role"], rec["code"], rec["how"]) == ("w2", "worker", -9, "SIGKILL")
    assert "w2 said this" in rec["log_tail"] and "on_worker_loss" in rec["action"]
    assert list(faults.workers) == ["w1"]            # no longer supervised, not restarted
    assert runner.check_exits(faults) is False and len(runner.unplanned_exits) == 1


def test_on_child_exit_fail_fails_at_the_first_one(tmp_path, setup):
    runner, faults = setup('run.on_child_exit="fail"',
                           workers={"w2": exited(tmp_path, "w2", -9)})
    with pytest.raises(ProcessFailed, match="w2 exited with SIGKILL; last lines of"):
        runner.check_exits(faults)
    assert runner.unplanned_exits[0]["action"].startswith("run failed")


def test_a_dead_forwarder_is_restarted_a_bounded_number_of_times(tmp_path, setup):
    runner, faults = setup("run.restart_after=0.5", "run.max_restarts=2",
                           forwarders={"fwd": exited(tmp_path, "fwd-fwd", 1)})
    assert runner.check_exits(faults) is False
    assert runner.unplanned_exits[0]["action"] == "restart after 0.5 s"
    ((_, role, node, rec),) = faults.restarts
    assert (role, node) == ("forwarder", "fwd") and rec is runner.unplanned_exits[0]
    for n in (2, 3):                                  # it keeps dying
        faults.restarts.clear()
        runner.forwarder_procs["fwd"] = exited(tmp_path, f"fwd-fwd-r{n}", -9)
        if n == 2:
            runner.check_exits(faults)
        else:
            with pytest.raises(RunFailed, match="exited unplanned .* 3 times"):
                runner.check_exits(faults)


def test_a_ps_that_says_the_training_cannot_go_on_fails_the_run(tmp_path, setup):
    runner, faults = setup("training.checkpoint=\"/tmp/x.npz\"",
                           ps=exited(tmp_path, "ps", 3))
    with pytest.raises(JobStopped, match="training cannot go on"):
        runner.check_exits(faults)
    assert runner.unplanned_exits == []               # its decision, not a death


def test_a_dead_ps_without_a_checkpoint_fails_the_run(tmp_path, setup):
    runner, faults = setup(ps=exited(tmp_path, "ps", -9))
    with pytest.raises(ProcessFailed, match="ps exited with SIGKILL") as e:
        runner.check_exits(faults)
    assert "no checkpoint" in runner.unplanned_exits[0]["action"]
    assert failed_run_exit(e.value) == 1


@pytest.mark.parametrize("code, runner_code", [(3, 3), (2, 2), (1, 1), (-9, 1)])
def test_the_run_exits_with_the_code_of_the_app_whose_exit_ended_it(tmp_path, setup, code,
                                                                    runner_code):
    # on_child_exit = fail: a worker's exit 3 (its PS silent) is the training's, not an error
    runner, faults = setup('run.on_child_exit="fail"',
                           workers={"w2": exited(tmp_path, "w2", code)})
    with pytest.raises(ProcessFailed) as e:
        runner.check_exits(faults)
    assert e.value.exit_code == code and failed_run_exit(e.value) == runner_code


def test_a_job_stopped_or_a_run_failed_on_its_own_exit_3_and_1():
    assert failed_run_exit(JobStopped("ps exited with code 3")) == 3
    assert failed_run_exit(RunFailed("not finished within run.timeout")) == 1
    assert failed_run_exit(ProcessFailed("fwd was not listening within 30 s")) == 1


def test_a_dead_ps_with_a_checkpoint_is_restarted(tmp_path, setup):
    runner, faults = setup("training.checkpoint=\"/tmp/x.npz\"", ps=exited(tmp_path, "ps", -9))
    assert runner.check_exits(faults) is False
    assert faults.pss["ps"] is None and faults.restarts[0][1:3] == ("ps", "ps")


def test_a_ps_that_finished_ends_the_run(tmp_path, setup):
    runner, faults = setup(ps=exited(tmp_path, "ps", 0))
    assert runner.check_exits(faults) is True and runner.unplanned_exits == []


def test_with_several_jobs_the_run_ends_when_every_ps_has_finished(tmp_path, setup):
    runner, faults = setup(ps=exited(tmp_path, "ps", 0))
    faults.pss["ps2"] = running(tmp_path, "ps2")
    assert runner.check_exits(faults) is False        # one job is still training
    faults.pss["ps2"].stop(grace=1)
    faults.pss["ps2"] = exited(tmp_path, "ps2b", 0)
    assert runner.check_exits(faults) is True


@pytest.mark.parametrize("policy", ["stop", "re-form"])
def test_a_dead_peer_goes_to_its_jobs_on_peer_loss_not_the_ps_branch(tmp_path, setup, policy):
    """kill -9 of a ring peer: recorded as a peer, left to the others (they stop or re-form,
    as after a [faults] kill); no checkpoint is asked for and the run is not failed here."""
    runner, faults = setup(f"training.on_peer_loss={policy!r}".replace("'", '"'),
                           scenario="ring",
                           peers={"w1": running(tmp_path, "w1"),
                                  "w3": exited(tmp_path, "w3", -9)})
    assert runner.check_exits(faults) is False
    (rec,) = runner.unplanned_exits
    assert (rec["who"], rec["role"], rec["how"]) == ("w3", "peer", "SIGKILL")
    assert f"on_peer_loss = {policy!r}" in rec["action"] and "checkpoint" not in rec["action"]
    assert list(faults.pss) == ["w1"]                # the survivors decide when the run ends
    faults.pss["w1"].stop(grace=1)
    faults.pss["w1"] = exited(tmp_path, "w1b", 0)
    assert runner.check_exits(faults) is True and len(runner.unplanned_exits) == 1


def test_a_peer_that_stops_the_training_stops_the_run_naming_the_peer_lost(tmp_path, setup):
    runner, faults = setup(scenario="ring", peers={"w1": running(tmp_path, "w1"),
                                                   "w3": exited(tmp_path, "w3", -9)})
    runner.check_exits(faults)
    faults.pss["w1"].stop(grace=1)
    faults.pss["w1"] = exited(tmp_path, "w1", 3)
    with pytest.raises(JobStopped, match=r"w1 exited with code 3 .*; peers gone before: w3 "
                                         r"\(SIGKILL, unplanned\)"):
        runner.check_exits(faults)


def test_a_dead_stage_names_the_stage_and_the_pipelines_policy(tmp_path, setup):
    runner, faults = setup(scenario="hetero", role="stage",
                           peers={"m1-fast": running(tmp_path, "m1-fast"),
                                  "m2-mid": exited(tmp_path, "m2-mid", -9)})
    assert runner.check_exits(faults) is False
    (rec,) = runner.unplanned_exits
    assert (rec["who"], rec["role"]) == ("m2-mid", "stage")
    assert "the pipeline stops" in rec["action"] and "stage m2-mid" in rec["action"]
    faults.pss["m1-fast"].stop(grace=1)
    faults.pss["m1-fast"] = exited(tmp_path, "m1-fast", 3)
    with pytest.raises(JobStopped, match=r"stages gone before: m2-mid \(SIGKILL, unplanned\)"):
        runner.check_exits(faults)


def test_a_dead_controller_is_recorded_once_and_the_jobs_go_on(tmp_path, setup):
    runner, faults = setup()
    runner.helpers.append(share.controller(exited(tmp_path, "share-ctl", -9), "ctl"))
    assert runner.check_exits(faults) is False and runner.check_exits(faults) is False
    (rec,) = runner.unplanned_exits
    assert (rec["role"], rec["how"]) == ("controller", "SIGKILL")
    assert "ordinary way" in rec["action"]
