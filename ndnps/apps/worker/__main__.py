"""A worker ("GPU"): ``python -m ndnps.apps.worker --name w1 [--config scenario.toml] [flags]``.

Protocol steps (numbered as in docs/design.md), from the worker's side (names in
ndnps/protocol/names.py), and where each lives:

  2  on_task (here)       /<gpu>/<ps>/<train>: accept, or decline when busy with another one
  3  join.py              /<ps>/<train>/<gpu>/<seg>: spec, hyper-parameters, shard, parameters
  4  registration.py      /*insert*/<ps>/<train> until /*distribute*/<ps>/<train> confirms;
                          refreshed every register_interval (soft state); leaving: *remove*
  5  gradients.py         /<gpu>/<ps>/<train>/<step>/<seg>: answered at once, or held until
                          the gradient is ready (re-expressed Interests are held and answered)
  6  receiver.py          /*distribute*/<ps>/<train>/<version>/<seg> pushed Data, assembled by
                          the Subscriber (ndnps/exchanges/transport/subscriber.py)
  7  job.py               the training loops: the next gradient on the new parameters
  9  receiver.py          holes, quiet tails, the probe timer: fetch only the missing segments

The worker serves one training, then leaves and exits 0 when the PS's last version (marked
done) arrives.  Exit 3: the training failed (no content, no confirmation, PS silent for
ps_timeout); 1: other errors; 2: bad flags.

Fault injection for tests (--drop-pushes-prob, --forge-gradient-at): faults.py.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from dataclasses import asdict

from ndnps.client.fetcher import reorder_floor
from ndnps.client.security import Security
from ndnps.client.wire import Data
from ndnps.lab.metrics import MetricsWriter
from ndnps.protocol import messages, names
from ndnps.protocol.config import ConfigError, read_table

from ..common.launch import (EXIT_JOB_FAILED, EXIT_SIGNAL, EXIT_USAGE, app_parser, begin,
                             Prepared, serve_prepared)
from .faults import Faults
from .job import Job
from .join import CONTENT_PATIENCE

log = logging.getLogger("worker")


class Worker:
    """Serves /<gpu>: takes one training (declining others while busy), runs it, exits."""

    def __init__(self, gpu: str, key: bytes | None, app, metrics: MetricsWriter | None = None,
                 faults: Faults | None = None, slowdown: float = 1.0,
                 content_patience: float = CONTENT_PATIENCE, synthetic: bool = False) -> None:
        self.gpu, self.key, self.app = names.check_id(gpu, "worker name"), key, app
        self.content_patience = content_patience
        self.metrics = metrics or MetricsWriter(None)
        self.faults = faults or Faults()
        self.slowdown = slowdown
        self.synthetic = synthetic          # synthetic gradients (ndnps.ml.synthetic)
        self.job: Job | None = None
        self.job_task: asyncio.Task | None = None
        self.finished: asyncio.Future | None = None
        app.on_distribute = self.on_distribute
        app.on_reconnect = self.on_reconnect

    async def run(self) -> int:
        self.finished = asyncio.get_running_loop().create_future()
        self.app.attach_handler(names.node(self.gpu), self.on_interest)
        if not await self.app.register(names.node(self.gpu)):
            log.error("the forwarder refused to register /%s", self.gpu)
            return EXIT_JOB_FAILED
        log.info("worker %s ready (reordering floor %g ms)", self.gpu,
                 reorder_floor(self.app) * 1e3)
        try:
            return await self.finished
        except asyncio.CancelledError:              # SIGTERM: leave properly first
            if self.job_task is not None:
                self.job_task.cancel()
                await asyncio.gather(self.job_task, return_exceptions=True)
            raise

    def on_interest(self, name, _param, reply, ctx) -> None:
        t = names.parse_task(name)
        if t is not None and t.gpu == self.gpu:
            self.on_task(t, reply)
            return
        c = names.parse_collect(name)
        job = self.job
        if c is not None and c.gpu == self.gpu and job is not None and \
                (c.ps, c.train) == (job.ps, job.train):
            job.grads.answer_collect(c, reply, ctx["deadline"])

    def on_task(self, t: names.Task, reply) -> None:
        """Step 2: accept (again, if the PS re-asks), or decline while busy elsewhere."""
        job = self.job
        fetching = False
        if job is None:
            self.job = job = Job(self, t.ps, t.train)
            self.job_task = asyncio.get_running_loop().create_task(self.run_job(job))
            accept, reason = True, ""
        elif (job.ps, job.train) == (t.ps, t.train):
            # re-asked: "already assigned" once we have the content (a PS that lost us takes
            # us back as we are); before that, a plain accept (it makes our content again)
            accept = True
            reason = messages.ALREADY_ASSIGNED if job.params is not None else ""
            if job.params is not None:
                job.spawn(job.resync())
            fetching = job.params is None
        else:
            accept, reason = False, f"busy with training /{job.ps}/{job.train}"
        sec = Security(self.key, names.key(t.ps, t.train))
        reply(self.app.make_data(names.task(self.gpu, t.ps, t.train),
                                 messages.task_reply(accept, reason), signer=sec.signer))
        log.info("task %s/%s: %s %s", t.ps, t.train, "accepted" if accept else "declined", reason)
        if fetching:
            # the PS is back (a restarted one re-offers the task): our content fetch asks
            # again now, not after the backoff its Nacks and timeouts built while it was gone
            # (a resumed PS waited worker_timeout for us and dropped us, chaos)
            job.fetcher.retry_now()

    async def run_job(self, job: Job) -> None:
        try:
            code = await job.run()
        except Exception:                   # a bug must end the process, not hang it
            log.exception("training %s/%s crashed", job.ps, job.train)
            code = 1
        except asyncio.CancelledError:
            code = EXIT_SIGNAL
        self.metrics.write({"event": "end", "code": code, "version": job.newest,
                            **asdict(job.counters), **asdict(job.rx.counters),
                            **asdict(job.fetch_stats),
                            **self.app.traffic(),
                           **self.app.link_events()})
        assert self.finished is not None            # run() made it before taking tasks
        if not self.finished.done():
            self.finished.set_result(code)

    def on_reconnect(self) -> None:
        """The forwarder came back (restarted): its persistent PIT entry is gone, insert again
        now rather than at the next refresh."""
        job = self.job
        if job is not None and job.push_mode == "persistent" and not job.done:
            job.counters.reinserts += 1
            job.reg.send_insert()

    def on_distribute(self, data: Data) -> None:
        if self.job is not None:
            self.job.on_push(data)


# ---- command line ---------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = app_parser(
        "python -m ndnps.apps.worker",
        "ndnps worker: registers /<name>, accepts one training from a PS, trains on its "
        "shard, answers the PS's collect Interests, receives pushed parameters (probing for "
        "lost ones), then leaves.",
        "0 done, 1 error, 2 bad flags, 3 the training failed", "one per step")
    p.add_argument("--name", required=True, help="this worker's name (one name component)")
    p.add_argument("--config", metavar="FILE", help="TOML file with a [training] table; "
                   "only its key and ps_timeout are used (the PS sends everything else)")
    p.add_argument("--content-patience", type=float, metavar="SECONDS",
                   help="how long to keep asking for the training content while the PS does "
                        "not answer (default: the config's ps_timeout, else "
                        f"{CONTENT_PATIENCE:.0f})")
    p.add_argument("--key", help="HMAC key of the training (overrides the config's)")
    p.add_argument("--slowdown", type=float, default=1.0, metavar="X",
                   help="emulate a device X times slower: each gradient takes X times its "
                        "CPU time, the rest awaited, the worker answering meanwhile "
                        "(stragglers, heterogeneous workers; ndnps.ml.device)")
    p.add_argument("--synthetic-gradients", action="store_true",
                   help="no model pass: each gradient is a deterministic stand-in of the "
                        "model's size (loss NaN), costing the profiled device time "
                        "(device_time = \"profiled\") or none; the data shard is not loaded "
                        "(network studies, simulations of many workers: ndnps.ml.synthetic)")
    f = p.add_argument_group("fault injection (tests only)")
    f.add_argument("--drop-pushes-prob", type=float, default=0.0, metavar="P",
                   help="drop each received pushed segment with probability P, as if lost")
    f.add_argument("--forge-gradient-at", type=int, default=-1, metavar="STEP",
                   help="first answer each segment of STEP's gradient signed with a wrong key")
    f.add_argument("--fault-seed", type=int, help="seed of the fault injection")
    return p.parse_args(argv)


def prepare(argv: list[str] | None) -> Prepared | int:
    """Everything before the connection: the worker to run, or the exit code of bad flags
    (their message printed)."""
    args = parse_args(argv)
    begin(args, args.name)
    try:
        names.check_id(args.name, "--name")
        key, patience = args.key, args.content_patience
        table = read_table(args.config) if args.config else {}
        if key is None and args.config:
            key = table.get("key", "")
            if not isinstance(key, str):
                raise ConfigError(f"training.key: expected a string, got {key!r}")
        if patience is None:
            patience = table.get("ps_timeout", CONTENT_PATIENCE)
            if isinstance(patience, bool) or not isinstance(patience, (int, float)):
                raise ConfigError(f"training.ps_timeout: expected seconds, got {patience!r}")
        if not patience > 0:
            raise ConfigError(f"--content-patience / training.ps_timeout: must be > 0, "
                              f"got {patience}")
        if not 0.0 <= args.drop_pushes_prob <= 1.0:
            raise ConfigError("--drop-pushes-prob: must be within [0, 1]")
        if args.slowdown < 1.0:
            raise ConfigError("--slowdown: must be >= 1")
    except (ConfigError, names.BadName) as e:
        print(f"worker: bad configuration: {e}", file=sys.stderr)
        return EXIT_USAGE
    faults = Faults(args.drop_pushes_prob, args.forge_gradient_at, args.fault_seed)
    metrics = MetricsWriter(args.metrics, role="worker", name=args.name)
    return Prepared(args, metrics,
                    lambda app: Worker(args.name, key.encode() if key else None, app, metrics,
                                       faults, args.slowdown, float(patience),
                                       args.synthetic_gradients).run())


def main(argv: list[str] | None = None) -> int:
    return serve_prepared(prepare(argv))


if __name__ == "__main__":
    sys.exit(main())
