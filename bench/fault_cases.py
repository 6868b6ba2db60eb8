"""The fault cases of `python -m bench faults` (docs/faults.md), one scenario run each: what is
injected, the scenario and its --set overrides (--quick's apart), what the run must show; and
the tolerances a run is judged by against the single-process reference.
"""
from __future__ import annotations

from dataclasses import dataclass, field

ACCURACY_TOLERANCE = 0.03       # runs with fewer gradients in some versions (continue, chaos)
PARAM_TOLERANCE = 1e-5          # runs that must end at the reference's parameters
RUN_TIMEOUT = 1500.0            # run.timeout for every case (a lossy run is slow, not wrong)


@dataclass
class Case:
    name: str
    fault: str                       # what is injected, for the table
    scenario: str
    sets: list[str] = field(default_factory=list)
    quick_sets: list[str] = field(default_factory=list)   # replaces `sets` with --quick
    exact: bool = True               # every version has every gradient: reference parameters
    expect: dict = field(default_factory=dict)            # summary key -> check
    # done by hand while the run goes on, once the PS reaches a version: "kill-worker:w2@40"
    # (SIGKILL that worker's process, unannounced), "kill-runner@20" (SIGKILL the runner),
    # "kill-controller@3" (the share controller)
    during: str | None = None
    recorder: str = "ps"             # whose metrics say the version (PS-less: a peer, a stage)
    # PS-less and sharing cases are judged by what their job promises, not the PS's ledger:
    # {"runner_exit": 0 | 3, "role": the unplanned exit's role, "reformed": [lost peers]}
    psless: dict | None = None


# the shortened chaos run (the integration test uses the same): every kind of fault, sooner
CHAOS_SHORT = ["training.epochs=40",       # time for a restarted worker to start and rejoin
               "faults.random={ kills = 2, seed = 7, from_version = 20, to_version = 70, "
               "restart_after = 1.5 }",
               "faults.kill=[{ ps = true, at_version = 50, restart_after = 1.0 }, "
               "{ forwarder = \"fwd\", at_version = 85, restart_after = 1.0 }]"]

# the hetero scenario, small and quick: a stage silent for 6 s stops the others (a stage
# slow to start on a loaded host is not taken for one lost)
HETERO_SMALL = ["training.hidden=[64,64,64,64,64]", "pipeline.device_scale=2.0",
                "training.epochs=30", "training.worker_timeout=6.0"]

CASES = [
    Case("worker-continue", "worker w2 killed at version 40, not restarted "
                            "(on_worker_loss = continue)",
         "worker-killed", ["faults.kill=[{ worker = \"w2\", at_version = 40 }]"],
         ["faults.kill=[{ worker = \"w2\", at_version = 40 }]", "training.epochs=10"],
         exact=False,
         expect={"workers_lost": (">=", 1), "workers_rejoined": ("==", 0),
                 "workers_lost_at_end": ("==", ["w2"]), "short_versions": (">", 0),
                 "exit:w2": ("==", -9)}),
    Case("worker-wait", "worker w2 killed at version 40, restarted 2 s later "
                        "(on_worker_loss = wait)",
         "worker-killed", ["training.on_worker_loss=\"wait\""],
         ["training.on_worker_loss=\"wait\"", "training.epochs=10"],
         expect={"workers_lost": (">=", 1), "workers_rejoined": (">=", 1),
                 "collects_redone": (">=", 1), "short_versions": ("==", 0),
                 "workers_lost_at_end": ("==", []), "exit:w2-r1": ("==", 0)}),
    # 60 epochs (600 versions, not the scenario's 300): a restarted process needs seconds to
    # start, and a run that ends first cannot show the rejoin (the runner records it)
    Case("worker-rejoin", "worker w2 killed at version 40, restarted 2 s later; rejoins "
                          "(continue; 60 epochs)",
         "worker-killed", ["training.epochs=60"], ["training.epochs=30"], exact=False,
         expect={"workers_lost": (">=", 1), "workers_rejoined": (">=", 1),
                 "workers_lost_at_end": ("==", []), "short_versions": (">", 0),
                 "exit:w2-r1": ("==", 0)}),
    Case("forwarder", "forwarder killed at version 40, restarted on its socket 1 s later",
         "forwarder-killed", [], ["training.epochs=10"],
         expect={"reconnects:all": (">=", 1), "workers_lost": ("==", 0),
                 "exit:fwd-fwd-r1": ("==", 0)}),
    Case("ps", "PS killed at version 45, restarted 1 s later from its checkpoint",
         "ps-killed", [], ["training.epochs=10"],
         expect={"ps_restarts": ("==", 1), "exit:ps-r1": ("==", 0),
                 "workers_lost": ("==", 0)}),
    Case("worker-unplanned", "worker w2 killed by hand (SIGKILL, not by [faults]) at version "
                             "40, not restarted (on_worker_loss = continue)",
         "worker-killed", ["faults.kill=[]"], ["faults.kill=[]", "training.epochs=10"],
         exact=False, during="kill-worker:w2@40",
         expect={"unplanned:w2": ("==", -9), "workers_lost": (">=", 1),
                 "workers_rejoined": ("==", 0), "workers_lost_at_end": ("==", ["w2"])}),
    Case("runner-killed", "the runner itself killed (SIGKILL) at version 20",
         "sync-sgd", ["training.epochs=50"], ["training.epochs=50"], during="kill-runner@20"),
    Case("peer-unplanned", "ring peer w3 killed by hand (SIGKILL) at version 20 "
                           "(on_peer_loss = re-form)",
         "ring", ['training.on_peer_loss="re-form"'],
         ['training.on_peer_loss="re-form"', "training.worker_timeout=3.0"], exact=False,
         during="kill-worker:w3@20", recorder="w1",
         psless={"runner_exit": 0, "role": "peer", "reformed": ["w3"]}),
    Case("stage-unplanned", "pipeline stage m2-mid killed by hand (SIGKILL) at version 5",
         "hetero", HETERO_SMALL, HETERO_SMALL, exact=False, during="kill-worker:m2-mid@5",
         recorder="m1-fast", psless={"runner_exit": 3, "role": "stage"}),
    Case("controller-unplanned", "the share controller killed by hand (SIGKILL) at version 3",
         "multi-job", [], [], exact=False, during="kill-controller@3", recorder="big",
         psless={"runner_exit": 0, "role": "controller"}),
    *[Case(f"loss-{p}{'+lp' if lp else ''}",
           f"{p}% loss on every link, both directions"
           + (", NDNLPv2 link reliability" if lp else ", end-to-end recovery alone"),
           "lossy", [f"links.loss={p / 100}", f"links.reliability={str(lp).lower()}"],
           [f"links.loss={p / 100}", f"links.reliability={str(lp).lower()}",
            "training.epochs=3"])
      for p, lp in ((0, False), (5, False), (10, False), (10, True), (20, False), (20, True))],
    Case("chaos", "chaos.toml: 3% loss, 3 random worker kills (restarted), PS killed at 120 "
                  "(checkpoint), forwarder killed at 220",
         "chaos", [], CHAOS_SHORT, exact=False,
         expect={"faults_done": ("==", "all"), "ps_restarts": ("==", 1),
                 "reconnects:all": (">=", 1), "workers_lost_at_end": ("==", [])}),
]
