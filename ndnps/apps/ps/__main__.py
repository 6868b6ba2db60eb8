"""The parameter server: ``python -m ndnps.apps.ps [--config scenario.toml] [flags]``.

A composition: the sans-I/O exchanges of ndnps.exchanges decide, the PS's parts do their I/O.
Protocol steps (numbered as in docs/design.md), from the PS's side (names in
ndnps/protocol/names.py), and the part doing each:

  2  task           /<gpu>/<ps>/<train> to each candidate; accept or decline   roster.py
  3  content        /<ps>/<train>/<gpu>/<seg>: spec, hyper-parameters, shard,  content.py
                    initial parameters
  4  registration   /*insert*/<ps>/<train> -> Data /*distribute*/<ps>/<train>  serving.py
  5  collect        /<gpu>/<ps>/<train>/<step>/<seg>, when exchanges.ps.collector  collect.py
                    says the gradient will be ready; the worker holds it
  6  push           /*distribute*/<ps>/<train>/<version>/<seg>, paced          serving.py
  9  probes         answered for the publisher's last few versions             serving.py
     leave          /*remove*/<ps>/<train>                                     serving.py
     rejoin         a lost worker's task re-offered (exchanges.ps.membership)     roster.py
     unicast        the baseline without persistent PIT                        common/unicast.py
     checkpoint     a restarted PS resumes                                     checkpoint.py

The update rule (exchanges.ps.update, pluggable: ``set_update_rule``) makes the next parameters
in loops.py's loops (sync: all live workers' gradients of v, averaged in worker-index
order, push v+1; async: each gradient applied as it arrives).  ``ParameterServer`` holds the
training's state (model, optimizer, version, done, accuracy: the parts read and advance it
through the narrow protocols their modules declare), its records, and the life cycle: the run
ends after the configured epochs/versions or at the target accuracy, the last version pushed
with ``done``; the model is saved (``--save``); the PS lingers for late probes.
Exit 0: done; 2: bad configuration; 3: the training cannot go on (too few workers); 1: other.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from dataclasses import asdict

from ndnps.client.fetcher import FetchStats
from ndnps.client.security import Security
from ndnps.exchanges.ps.membership import Member, Membership, State
from ndnps.exchanges.ps.update import UpdateRule, rule_for
from ndnps.lab.metrics import Delta, MetricsWriter
from ndnps.ml.data import load_dataset
from ndnps.ml.models import SGD, build_model
from ndnps.ndn.conventions import segment
from ndnps.protocol import messages, names
from ndnps.protocol.codec import flatten, param_spec
from ndnps.protocol.config import ConfigError, PsConfig, add_arguments, load

from ..common.aggregate import Aggregate
from ..common.launch import (EXIT_JOB_FAILED, EXIT_OK, EXIT_USAGE, app_parser, begin,
                             Prepared, serve_prepared)
from ..common.share import Share
from ..common.training import JobFailed, PsCounters, total_steps, training_fetcher
from . import checkpoint
from .collect import Collect
from .content import Content
from .loops import AsyncTraining, run_sync
from .roster import Roster
from .serving import Serving

__all__ = ["JobFailed", "ParameterServer", "PsCounters", "main"]

log = logging.getLogger("ps")


class ParameterServer:
    roster: Roster          # (made after the content, which reports fetches to it)

    def __init__(self, cfg: PsConfig, app, metrics: MetricsWriter | None = None,
                 save_path: str | None = None, update_rule: UpdateRule | None = None) -> None:
        self.cfg, self.app = cfg, app
        self.metrics = metrics or MetricsWriter(None)
        self.save_path = save_path
        who, model, sgd = cfg.who, cfg.model, cfg.sgd
        self.sec = Security(who.key_bytes, names.key(who.ps, who.train))
        self.dataset = ds = load_dataset(model.dataset, model.seed, **model.dataset_kwargs())
        self.spec = {"n_in": ds.n_features, "n_classes": ds.n_classes, **model.model_spec()}
        self.model = build_model(self.spec, model.seed)          # = train_sync_reference's
        self.pspec = param_spec(self.model.params)
        self.n_params = self.model.n_params
        self.opt = SGD(sgd.lr, sgd.momentum, sgd.weight_decay)
        self.rule = update_rule or rule_for(cfg.update.mode, cfg.update.max_staleness)
        self.version = 0
        self.collected: dict[str, int] = {}         # async: last step collected per worker
        self.accuracy: float | None = None
        self.done = False
        self.membership = Membership(
            min_workers=who.min_workers, rejoin_interval=cfg.tasks.rejoin_interval,
            rejoin_timeout=cfg.tasks.rejoin_timeout,
            fetch_patience=max(cfg.tasks.rejoin_interval, 4 * cfg.transport.segment_timeout))
        self.counters = PsCounters()
        self.fetch_stats = FetchStats()
        # a collect's segments: as long as its worker lives
        self.fetcher = training_fetcher(cfg.transport, app, self.sec.validator,
                                        self.fetch_stats, cfg.liveness.worker_timeout)
        # the parts: each owns its exchange's I/O (see their modules)
        self.content = Content(self, self.membership, self.sec.signer,
                               on_fetched=lambda w: self.roster.fetched(w))
        self.roster = Roster(cfg, self, self.membership, self.fetcher, self.content,
                             self.metrics, self.counters)
        self.collect = Collect(cfg, app, self.fetcher, self.n_params, self.counters,
                               self.roster.drop, on_push_report=self.on_push_report)
        # in-network aggregation: the gradients' sums asked of the network (common/aggregate.py)
        self.aggregate = Aggregate(cfg, app, self.fetcher, self.sec, self.n_params,
                                   self.counters, self.roster.drop) \
            if cfg.aggregation.aggregate_at else None
        self.share = Share(who, cfg.sharing, app, who.ps, self.sec.validator)   # docs/sharing.md
        self.serving = Serving(cfg, app, self, self.membership, self.content, self.sec.signer,
                               self.counters)
        self.delta = Delta()
        self.resumed_from: int | None = None        # the checkpoint's version, if resumed
        self.restarts = 0                           # resumptions so far (the checkpoint's count)
        self.resumed_steps: dict[str, int] = {}     # async: each worker's next step, resumed

    def set_update_rule(self, rule: UpdateRule) -> None:
        """The rule that turns gradients into parameters (exchanges.ps.update): before run()."""
        self.rule = rule

    @property
    def workers(self) -> list[Member]:
        return self.membership.members

    @property
    def live(self) -> list[Member]:
        return self.membership.live

    def loop_time(self) -> float:
        return asyncio.get_running_loop().time()

    # ---- life cycle ------------------------------------------------------------------------

    async def run(self) -> int:
        cfg, who = self.cfg, self.cfg.who
        self.serving.attach()
        try:
            if not await self.app.register(names.node(who.ps)):
                raise JobFailed(f"the forwarder refused to register /{who.ps}")
            resumed = self.resume() if cfg.checkpointing.checkpoint else None
            accepted = await self.roster.assign_tasks()
            if resumed is not None:
                # the workers of the checkpoint, in its order (shards and averaging as before);
                # those that did not accept now are lost, and re-offered the task
                self.prepare_content(resumed)
                for w in [w for w in self.workers if w.gpu not in accepted]:
                    self.roster.drop(w, "did not accept the resumed training")
                await self.push_resumed()
            else:
                self.prepare_content(accepted)
            await (run_sync(self) if cfg.update.mode == "sync" else AsyncTraining(self).run())
        except JobFailed as e:
            log.error("training %s/%s cannot go on: %s", who.ps, who.train, e)
            self.metrics.write({"event": "failed", "reason": str(e)})
            await self.abort()
            return EXIT_JOB_FAILED
        except asyncio.CancelledError:
            log.warning("stopped: telling the workers the training is aborted")
            await self.abort()
            raise
        except Exception:
            await self.abort()                 # a bug: the workers need not wait ps_timeout
            raise
        await self.finish()
        return EXIT_OK

    async def push_resumed(self) -> None:
        """A resumed PS pushes its checkpoint's version again, as the PS before it did (the
        same bytes): a worker that lacks it (restarted just before the kill, or the push cut
        short) has it at once, and probes for it are answered.  Before, such a worker asked
        in vain until dropped: nobody held that version any more."""
        await self.serving.push(self.version, False)

    async def abort(self) -> None:
        """Best effort: one more version marked aborted, so workers leave now instead of
        waiting ps_timeout for a PS that is gone."""
        if not self.workers or self.done:
            return
        self.done = True
        try:
            await asyncio.wait_for(self.serving.push(self.version + 1, True, aborted=True), 1.0)
            await asyncio.sleep(0.05)             # let the socket flush before we go
        except (asyncio.TimeoutError, OSError, ConnectionError):
            pass

    # ---- step 3: training content ----------------------------------------------------------

    @property
    def total_steps(self) -> int:
        """Steps (sync: versions) per worker: epochs over the shard, capped by max_versions."""
        return total_steps(self.cfg.sgd, len(self.dataset.X_train), len(self.workers))

    def prepare_content(self, gpus: list[str]) -> None:
        """The training's workers are `gpus`, in index order: each one's content is made."""
        cfg = self.cfg
        mode, push_mode = cfg.update.mode, cfg.push.push_mode
        self.membership.admit(gpus, self.resumed_steps)
        vec = flatten(self.model.params)
        for w in self.workers:
            self.content.make(w, vec)
        segments = len(segment(messages.params_blob(vec, 0, False)))
        log.info("training %s/%s: %d workers, %d parameters (%d segments), %d steps, %s/%s",
                 cfg.who.ps, cfg.who.train, len(gpus), self.n_params, segments,
                 self.total_steps, mode, push_mode)
        self.metrics.write({"event": "start", "workers": gpus, "n_params": self.n_params,
                            "total_steps": self.total_steps, "mode": mode,
                            "push_mode": push_mode, "version": self.version,
                            "resumed_from": self.resumed_from, "restarts": self.restarts})

    # ---- the model's progress (loops.py's loops call these) -------------------------------

    def evaluate(self, force: bool = False) -> float | None:
        if force or self.version % self.cfg.sgd.eval_every == 0:
            ds = self.dataset
            self.accuracy = self.model.accuracy(ds.X_test, ds.y_test)
            return self.accuracy
        return None

    def is_done(self, accuracy: float | None) -> bool:
        target = self.cfg.sgd.target_accuracy
        return bool(target and accuracy is not None and accuracy >= target)

    # ---- records, and the end -------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """The PS's counters, its publisher's and its unicast server's (metrics names)."""
        return {**asdict(self.counters),
                "probes_answered": self.serving.publisher.probes_answered,
                **({f"push_rate_{k}": v for k, v in asdict(self.serving.push_rate.counters).items()}
                   if self.serving.push_rate is not None else {}),
                "params_served": self.serving.unicast.served}

    def aggregate_stats(self) -> dict[str, int]:
        """The sums' fetch statistics (metrics names: aggregate_<field>), with aggregation."""
        if self.aggregate is None:
            return {}
        return {f"aggregate_{k}": v for k, v in asdict(self.aggregate.stats).items()}

    def on_push_report(self, report: object) -> None:
        self.serving.on_push_report(report)

    def record(self, **fields) -> None:
        counters = {**self.app.traffic(), **self.counts(), **asdict(self.fetch_stats),
                    **self.aggregate_stats()}
        self.metrics.write({"version": self.version, "workers": len(self.live), **fields,
                            "segment_rto": self.fetcher.base_rto(),
                            "push_rate_mbps": self.serving.pacer.rate * 8e-6,
                            **self.delta.take(counters)})

    async def finish(self) -> None:
        who = self.cfg.who
        if self.accuracy is None:
            self.evaluate(force=True)
        log.info("training %s/%s done: version %d, test accuracy %.4f", who.ps, who.train,
                 self.version, self.accuracy)
        if self.save_path:
            checkpoint.save_model(self.save_path, {
                "ps": who.ps, "train": who.train, "version": self.version,
                "accuracy": self.accuracy, "model_spec": self.spec,
                "mode": self.cfg.update.mode},
                self.model.params)
            log.info("model saved to %s", self.save_path)
        await self.serving.linger()
        self.roster.cancel()
        self.metrics.write({"event": "end", "version": self.version, "accuracy": self.accuracy,
                            "workers": [w.gpu for w in self.live],
                            "lost": [w.gpu for w in self.workers if w.state is not State.LIVE],
                            "resumed_from": self.resumed_from, "restarts": self.restarts,
                            **self.counts(), **asdict(self.fetch_stats), **self.app.traffic(),
                            **self.aggregate_stats(),
                            **self.app.link_events()})

    # ---- checkpoint (PS restart): checkpoint.py ------------------------------------------

    def write_checkpoint(self, path: str) -> None:
        progress = checkpoint.Progress(
            self.version, self.done, [w.gpu for w in self.workers], self.restarts,
            self.accuracy, {w.gpu: w.steps_done for w in self.workers}, dict(self.collected))
        checkpoint.write(path, checkpoint.fingerprint(self.cfg, self.spec), progress,
                         self.model.params, self.opt.state_dict())
        self.counters.checkpoints += 1

    def resume(self) -> list[str] | None:
        """Load the checkpoint if there is one: version, parameters, optimizer state.  Returns
        its workers (in index order), or None when starting afresh."""
        path = self.cfg.checkpointing.checkpoint
        try:
            got = checkpoint.load(path, checkpoint.fingerprint(self.cfg, self.spec),
                                  list(self.cfg.who.workers), list(self.model.params))
        except checkpoint.CheckpointError as e:
            raise JobFailed(str(e)) from None
        if got is None:
            return None
        p = got.progress
        self.model.load_params(got.params)
        self.opt.load_state_dict(got.optimizer)
        self.version = self.resumed_from = p.version
        self.resumed_steps, self.collected, self.restarts = p.steps, p.collected, p.restarts
        log.info("resumed from checkpoint %s: version %d (restart %d)", path, self.version,
                 self.restarts)
        self.metrics.write({"event": "resumed", "version": self.version, "path": path,
                            "restarts": self.restarts})
        return p.workers


# ---- command line ---------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = app_parser(
        "python -m ndnps.apps.ps",
        "ndnps parameter server: assigns the training to workers, serves the training "
        "content, collects gradients, pushes parameters along the persistent PIT (or serves "
        "them per worker in unicast mode).",
        "0 done, 1 error, 2 bad configuration, 3 the training cannot go on",
        "one per version")
    p.add_argument("--config", metavar="FILE", help="TOML file with a [training] table "
                   "(the scenario file); flags override it")
    p.add_argument("--save", metavar="FILE.npz", help="save the final model here")
    add_arguments(p)
    return p.parse_args(argv)


def prepare(argv: list[str] | None) -> Prepared | int:
    """Everything before the connection: the PS to run, or the exit code of a bad
    configuration (its message printed)."""
    args = parse_args(argv)
    begin(args, "ps")
    try:
        cfg = PsConfig.of(load(args.config, args))
        if cfg.device.device_time == "profiled":    # the workers' devices need the profile
            cfg.device.step_cost(0, 0, False)
    except ConfigError as e:
        print(f"ps: bad configuration: {e}", file=sys.stderr)
        return EXIT_USAGE
    metrics = MetricsWriter(args.metrics, role="ps", name=cfg.who.ps, train=cfg.who.train)
    metrics.write({"event": "launched"})        # the PS's start, for its start-to-end time
    return Prepared(args, metrics, lambda app: ParameterServer(cfg, app, metrics, args.save).run())


def main(argv: list[str] | None = None) -> int:
    return serve_prepared(prepare(argv))


if __name__ == "__main__":
    sys.exit(main())
