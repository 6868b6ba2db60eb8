"""A peer of PS-less training: ``python -m ndnps.apps.peer --name p1 --config FILE``.

Every peer reads the same ``[training]`` (its `collective` set; `workers` are the peers, in
index order): the model, its initial parameters (the seed), its data shard (its index) and the
hyper-parameters come from the file, as a PS's training content would bring them, so no
coordinator process is needed (docs/collectives.md says why). Each version, every peer
computes its gradient on the parameters all hold, the peers combine them (common/combine.py:
ring, BCube or in-network all-reduce), and each applies the same update rule
(ndnps.exchanges.ps.update) to the same mean: the parameters stay bit-identical, which each
version's record shows (`digest`; the scenario runner compares them across peers).

Serves /<name>: its parts of every all-reduce step and its gradients (common/published.py).
Once the training is over a peer stays until every other peer says it is done (a marker each
publishes) and its prefix has been quiet for a moment, `linger` at most: the others may still
be fetching from it. A peer silent for worker_timeout, with on_peer_loss = "stop", ends the
training: the peers waiting for it exit 3 naming it, and the peers waiting for them name
those (a ring's stall travels along it; the runner's error lists the peers gone first); with
"re-form" (ring, ina) the survivors hold a roll call and go on without it (`reform`). Exit 0:
done; 2: bad configuration; 3: the training stopped; 1: other errors.
"""
from __future__ import annotations

import argparse
import asyncio
import copy
import hashlib
import logging
import sys
from collections import Counter
from dataclasses import asdict

import numpy as np

from ndnps.client.fetcher import FetchError, FetchStats
from ndnps.client.security import Security
from ndnps.client.segments import sign_parts
from ndnps.exchanges.ps.update import Contribution, rule_for
from ndnps.lab.metrics import Delta, MetricsWriter
from ndnps.ml.data import load_dataset
from ndnps.ml.models import SGD, build_model
from ndnps.ml.train import WorkerBatches
from ndnps.ndn.clock import monotonic
from ndnps.protocol import messages, names
from ndnps.protocol.codec import CodecError, decode_tensors, encode_tensors, flatten
from ndnps.protocol.config import ConfigError, PeerConfig, load_member

from ..common.combine import (FRESHNESS_MS, HELD_FIRST, InNetwork, PeerLost, Scheduled, Shared,
                              round_of)
from ..common.launch import (EXIT_JOB_FAILED, EXIT_OK, EXIT_USAGE, app_parser, begin,
                             Prepared, serve_prepared)
from ..common.linger import linger
from ..common.published import Published
from ..common.share import Share
from ..common.training import JobFailed, total_steps, training_fetcher

log = logging.getLogger("peer")



def roll_key(epoch: int) -> tuple:
    """What a peer's roll-call answer is published under: the first round of its epoch."""
    return (round_of(0, epoch), "roll")


def digest(vector: np.ndarray) -> str:
    """A version's parameters, as the runner compares them across peers."""
    return hashlib.blake2b(np.ascontiguousarray(vector).tobytes(), digest_size=8).hexdigest()


class Peer:
    def __init__(self, cfg: PeerConfig, name: str, app, metrics: MetricsWriter) -> None:
        if name not in cfg.who.workers:
            raise ConfigError(f"--name: {name!r} is not one of training.workers")
        self.cfg, self.name, self.app, self.metrics = cfg, name, app, metrics
        who, model, sgd = cfg.who, cfg.model, cfg.sgd
        self.index = who.workers.index(name)
        self.sec = Security(who.key_bytes, names.key(who.ps, who.train))
        ds = self.dataset = load_dataset(model.dataset, model.seed, **model.dataset_kwargs())
        spec = {"n_in": ds.n_features, "n_classes": ds.n_classes, **model.model_spec()}
        self.model = build_model(spec, model.seed)       # every peer's: the same parameters
        self.n_params = self.model.n_params
        self.opt = SGD(sgd.lr, sgd.momentum, sgd.weight_decay)
        self.rule = rule_for("sync", 0)         # (sync averages: no staleness)
        self.batches = WorkerBatches(ds, len(who.workers), self.index, sgd.batch, model.seed)
        self.fetch_stats = FetchStats()
        self.fetcher = training_fetcher(cfg.transport, app, self.sec.validator,
                                        self.fetch_stats, cfg.liveness.worker_timeout)
        self.sent_by_level: Counter[int] = Counter()    # Data bytes we sent, by BCube level
        self.published = Published(on_sent=self._sent)
        self.members = list(who.workers)        # the collective's peers, this epoch
        self.epoch = 0                          # re-formed collectives so far
        self.share = Share(who, cfg.sharing, app, name, self.sec.validator)   # docs/sharing.md
        self.combine = self.make_combine()
        self.before: tuple | None = None        # re-form: (params, velocity) of self.version - 1
        self.version = 0
        self.accuracy: float | None = None
        self.last_asked = 0.0                   # when an Interest for our newest version came
        self.last_compute = 0.0                 # s the last gradient took (the CPU's part)
        self.delta = Delta()

    @property
    def total_steps(self) -> int:
        """Versions: epochs over a peer's shard, capped by max_versions (as a PS counts)."""
        return total_steps(self.cfg.sgd, len(self.dataset.X_train), len(self.cfg.who.workers))

    def make_combine(self) -> InNetwork | Scheduled | Shared:
        c = self.cfg.peers
        if c.collective != "ina":
            bcube = (c.bcube_n, c.bcube_levels(len(self.cfg.who.workers))) \
                if c.collective == "bcube" else None
            return Scheduled(self, bcube)
        return Shared(self, self.share) if self.cfg.sharing.share_controller else InNetwork(self)

    def round(self, v: int) -> int:
        return round_of(v, self.epoch)

    def _sent(self, key: tuple, nbytes: int) -> None:
        # a part's key is (v, reduce, set, level, part); a gradient's (v, "gradient")
        self.sent_by_level[key[3] if len(key) == 5 else 0] += nbytes

    def run_time(self) -> float:
        return monotonic() - self.metrics.start

    # ---- serving ------------------------------------------------------------------------------

    def on_interest(self, name, _param, reply, ctx) -> None:
        r = names.parse_roll(name)
        if r is not None:
            if (r.peer, r.ps, r.train) == (self.name, self.cfg.who.ps, self.cfg.who.train):
                self.published.ask(roll_key(r.epoch), r.segment, reply, ctx["deadline"])
            return
        p = names.parse_partial(name)
        if p is not None and p.peer == self.name and p.train == self.cfg.who.train:
            key: tuple = (p.version, p.reduce, p.set, p.level, p.part)
            seg = p.segment
        else:
            c = names.parse_collect(name)
            if c is None or c.gpu != self.name or (c.ps, c.train) != (self.cfg.who.ps,
                                                                      self.cfg.who.train):
                return
            key, seg = (c.step, "gradient"), c.segment
        if key[0] >= self.round(self.version) - 1:
            self.last_asked = monotonic()
        self.published.ask(key, seg, reply, ctx["deadline"])

    # ---- the training -------------------------------------------------------------------------

    async def run(self) -> int:
        cfg = self.cfg
        self.app.attach_handler(names.node(self.name), self.on_interest)
        if not await self.app.register(names.node(self.name)):
            log.error("the forwarder refused to register /%s", self.name)
            return EXIT_JOB_FAILED
        try:
            total = self.total_steps
            self.metrics.write({"event": "start", "workers": self.members,
                                "n_params": self.n_params, "total_steps": total, "mode": "sync",
                                "collective": cfg.peers.collective, "index": self.index,
                                "version": 0, "analytic_bytes_by_level": {
                                    str(k): v for k, v in self.combine.analytic().items()}})
            log.info("peer %s (%d of %d) ready: %s all-reduce, %d parameters, %d versions",
                     self.name, self.index + 1, len(self.members), cfg.peers.collective,
                     self.n_params, total)
            done = False
            while not done:
                try:
                    done = await self.step(total)
                except PeerLost as e:
                    if cfg.peers.on_peer_loss != "re-form":
                        raise
                    await self.reform(e)
        except (PeerLost, JobFailed) as e:
            log.error("training %s/%s stops at version %d: %s", cfg.who.ps, cfg.who.train,
                      self.version, e)
            self.metrics.write({"event": "failed", "reason": str(e), "version": self.version})
            self.end(EXIT_JOB_FAILED)
            return EXIT_JOB_FAILED
        await self.linger()
        self.end(EXIT_OK)
        log.info("training %s/%s done at version %d, test accuracy %.4f", cfg.who.ps,
                 cfg.who.train,
                 self.version, self.accuracy if self.accuracy is not None else float("nan"))
        return EXIT_OK

    async def step(self, total: int) -> bool:
        """One version: our gradient, the collective, the update; True when the last."""
        v = self.version
        if isinstance(self.combine, Shared):
            self.combine.prepare(v, self.cfg.device.device_ms / 1000 + self.last_compute)
            await asyncio.sleep(0)          # an ask due now goes out before the computation
        if self.cfg.device.device_ms:       # an accelerator's step, emulated
            await asyncio.sleep(self.cfg.device.device_ms / 1000)
        t0 = monotonic()            # the process's clock: 0 s in a simulation's virtual time
        X, y = self.batches.for_step(v)
        loss, grads = self.model.loss_and_grad(X, y)
        vector = flatten(grads)
        compute = self.last_compute = monotonic() - t0
        computed_at = self.run_time()
        mean = await self.combine(v, vector, loss, compute)
        if self.cfg.peers.on_peer_loss == "re-form":    # a re-formed collective may redo v
            self.before = (copy.deepcopy(self.model.params), copy.deepcopy(self.opt.velocity))
        self.rule.apply(self.model.params, self.opt, v,
                        [Contribution(0, messages.Gradient(v, v, mean, loss, compute))])
        self.version = v + 1
        ready_at = self.run_time()
        accuracy = self.evaluate(force=self.version >= total)
        target = self.cfg.sgd.target_accuracy
        done = self.version >= total or bool(target and accuracy is not None
                                              and accuracy >= target)
        shared = self.combine.last.record() if isinstance(self.combine, Shared) and \
            self.combine.last is not None else {}
        self.metrics.write({
            "version": self.version, "loss": loss, "compute": compute, **shared,
            "computed_at": computed_at, "ready_at": ready_at, "sync": ready_at - computed_at,
            "digest": digest(flatten(self.model.params)), "accuracy": accuracy,
            "sent_by_level": {str(k): v for k, v in sorted(self.sent_by_level.items())},
            **self.delta.take({**self.app.traffic(), **asdict(self.fetch_stats),
                               **self.combine.counts()})})
        self.sent_by_level.clear()
        return done

    async def reform(self, lost: PeerLost) -> None:
        """on_peer_loss = "re-form": a roll call for the next epoch — every peer of this one
        is asked where it stands (names.roll; a peer answers once it is in the roll call too,
        and every live one gets there: the collective is stuck for all of them) — then the
        collective goes on with those that answered, from the version the furthest behind of
        them is at (a peer one version ahead, which finished it before the loss, goes back to
        the parameters it kept). JobFailed: fewer than min_workers, or peers further apart."""
        cfg = self.cfg
        self.epoch += 1
        log.warning("version %d: %s; roll call for epoch %d", self.version, lost, self.epoch)
        epoch = self.epoch
        self.published.publish(roll_key(epoch), sign_parts(
            [encode_tensors([], kind="roll", version=self.version)],
            lambda s: names.roll(self.name, cfg.who.ps, cfg.who.train, epoch, s),
            self.sec.signer,
            FRESHNESS_MS))
        until = asyncio.get_running_loop().time() + 2 * cfg.liveness.worker_timeout

        async def where(peer: str) -> int | None:
            try:
                parts, _, _ = await self.fetcher.fetch_held(
                    lambda s: names.roll(peer, cfg.who.ps, cfg.who.train, epoch, s), 0,
                    HELD_FIRST, cfg.transport.collect_lifetime, until)
                _, meta = decode_tensors(b"".join(parts))
                return int(meta["version"]) if meta.get("kind") == "roll" else None
            except (FetchError, CodecError, KeyError, TypeError, ValueError):
                return None

        others = [p for p in self.members if p != self.name]
        at = dict(zip(others, await asyncio.gather(*(where(p) for p in others))))
        at[self.name] = self.version
        versions = {p: v for p in self.members if (v := at.get(p)) is not None}
        alive = list(versions)
        lost_peers = [p for p in self.members if p not in versions]
        r = min(versions.values())
        if len(alive) < cfg.who.min_workers or max(versions.values()) > r + 1:
            raise JobFailed(f"epoch {epoch}: peers {alive} at versions "
                            f"{list(versions.values())} cannot re-form (min_workers = "
                            f"{cfg.who.min_workers})")
        if self.version == r + 1:                   # we finished r before the loss: redo it
            assert self.before is not None
            self.model.params, self.opt.velocity = self.before
            self.version = r
        self.members = alive
        self.combine = self.make_combine()
        log.warning("epoch %d: %d peers (lost %s) go on from version %d", epoch, len(alive),
                    ", ".join(lost_peers) or "none", r)
        self.metrics.write({"event": "reformed", "epoch": epoch, "peers": alive,
                            "lost": lost_peers, "version": r, "reason": str(lost)})

    def evaluate(self, force: bool = False) -> float | None:
        """Every peer evaluates when a target accuracy may stop the training (they decide
        alike: the same parameters); otherwise the first peer, for the records."""
        cfg = self.cfg
        if not (force or self.version % cfg.sgd.eval_every == 0):
            return None
        if not cfg.sgd.target_accuracy and self.members[0] != self.name and not force:
            return None
        self.accuracy = self.model.accuracy(self.dataset.X_test, self.dataset.y_test)
        return self.accuracy

    async def linger(self) -> None:
        """Stay while the others may still fetch from us (common/linger.py)."""
        await linger(self, [p for p in self.members if p != self.name],
                     self.round(self.version))

    def end(self, code: int) -> None:
        self.metrics.write({"event": "end", "code": code, "version": self.version,
                            "accuracy": self.accuracy, "collective": self.cfg.peers.collective,
                            **self.app.traffic(), **asdict(self.fetch_stats),
                            **self.combine.counts(), **self.published.counts()})


# ---- command line ---------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = app_parser(
        "python -m ndnps.apps.peer",
        "ndnps peer: PS-less training. Reads [training] (collective = ring | ina | bcube), "
        "computes its gradients on its shard, combines them with the other peers' and "
        "applies the update, version after version.",
        "0 done, 1 error, 2 bad configuration, 3 the training stopped (a peer was lost)",
        "one per version")
    p.add_argument("--name", required=True, help="this peer's name: one of training.workers")
    p.add_argument("--config", required=True, metavar="FILE",
                   help="TOML file with the [training] table (collective set)")
    return p.parse_args(argv)


def prepare(argv: list[str] | None) -> Prepared | int:
    """Everything before the connection: the peer to run, or the exit code of a bad
    configuration (its message printed)."""
    args = parse_args(argv)
    begin(args, args.name)
    try:
        cfg = PeerConfig.of(load_member(args.config, args.name))
        if not cfg.peers.collective:
            raise ConfigError("training.collective: empty (a PS trains this job: ndnps.apps.ps)")
    except (ConfigError, OSError) as e:
        print(f"peer: bad configuration: {e}", file=sys.stderr)
        return EXIT_USAGE
    metrics = MetricsWriter(args.metrics, role="peer", name=args.name)
    return Prepared(args, metrics, lambda app: Peer(cfg, args.name, app, metrics).run())


def main(argv: list[str] | None = None) -> int:
    return serve_prepared(prepare(argv))


if __name__ == "__main__":
    sys.exit(main())
