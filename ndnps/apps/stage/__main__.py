"""A stage of pipeline + data-parallel training on devices of different speeds (docs/hetero.md):
``python -m ndnps.apps.stage --name m1-fast --config FILE``.

The training's `machines` virtual machines each hold one device of every kind; within a
machine the model's layers run as a pipeline of stages, stage s on the device `stage_kinds[s]`
holding `stage_layers[s]` layers (the planner's split: ndnps.planner); across machines, data
parallel. App `m<j>-<kind>` is machine j's stage on that kind. Every stage reads the same
``[training]``: the model's initial parameters (the seed), its machine's data shard and
mini-batches (ndnps.ml.train.WorkerBatches, machine j of m), the hyper-parameters.

Each step, a mini-batch of `batch` samples is cut into `micro_batches` micro-batches that
every stage runs forward and backward in its one-forward-one-backward order
(ndnps.exchanges.pipeline.stage). A stage fetches its inputs by Interest: the previous stage's
activation of micro-batch i (``/<prev>/<train>/<v>/act/<i>/<s>``), the next stage's gradient
(``/<next>/<train>/<v>/grad/<i>/<s>``), each asked for once per micro-batch — the activations
no more than the stage's 1F1B bound ahead of its forwards, a gradient once its forward is done —
and held by the producer until made: one Interest outstanding per micro-batch is the flow
control, and lost packets are fetched again as in every other exchange. Its own outputs it
serves under its prefix, signed. The device's speed is made real by measuring each operation's
CPU time (after a rehearsal that warms the caches), or taking the planner's profile of its
layers (`device_time`), and waiting out the rest of the device's time (ndnps.ml.device). When
every micro-batch is through, the stage's gradient (the mini-batch's mean) is averaged with the
same stage of the other machines by ring all-reduce (common/combine.py) and the optimizer steps:
the same stage of every machine holds the same parameters (a digest per version shows it).

Exit 0: done (``--save FILE``: the stage's parameters, .npz); 2: bad configuration; 3: a
stage it waited for was silent for worker_timeout; 1: other errors.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ndnps.client.fetcher import FetchStats
from ndnps.client.security import Security
from ndnps.client.segments import sign_segments
from ndnps.exchanges.pipeline.schedule import FORWARD, Op
from ndnps.exchanges.pipeline.stage import Sent, StageWork
from ndnps.lab.metrics import Delta, MetricsWriter
from ndnps.ml.data import load_dataset
from ndnps.ml.device import Busy, Device, factor
from ndnps.ml.models import SGD, build_model
from ndnps.ml.stages import StageModel
from ndnps.ml.train import WorkerBatches, steps_per_epoch
from ndnps.ndn.clock import monotonic
from ndnps.protocol import names
from ndnps.protocol.codec import flatten, param_spec, unflatten
from ndnps.protocol.config import ConfigError, StageConfig, load_member

from ..common.combine import FRESHNESS_MS, PeerLost, Scheduled, fetch_floats
from ..common.launch import (EXIT_JOB_FAILED, EXIT_OK, EXIT_USAGE, app_parser, begin,
                             Prepared, serve_prepared)
from ..common.linger import linger
from ..common.published import Published
from ..common.training import JobFailed, total_steps, training_fetcher

log = logging.getLogger("stage")


def micro_slices(batch: int, micro: int) -> list[slice]:
    """A mini-batch's micro-batches: `micro` contiguous slices, the first `batch % micro` one
    sample longer (as numpy's array_split cuts)."""
    out, at = [], 0
    for i in range(micro):
        n = batch // micro + (1 if i < batch % micro else 0)
        out.append(slice(at, at + n))
        at += n
    return out


def digest(params: dict[str, np.ndarray]) -> str:
    return hashlib.blake2b(flatten(params).tobytes(), digest_size=8).hexdigest()


class Stage:
    def __init__(self, cfg: StageConfig, name: str, app, metrics: MetricsWriter) -> None:
        grid = cfg.stages.stage_apps()
        where = [(j, s) for j, row in enumerate(grid) for s, a in enumerate(row) if a == name]
        if not where:
            raise ConfigError(f"--name: {name!r} is not one of the pipeline's stage apps")
        self.cfg, self.name, self.app, self.metrics = cfg, name, app, metrics
        self.machine, self.index = where[0]
        row = grid[self.machine]
        self.stages = len(row)
        self.prev = row[self.index - 1] if self.index > 0 else None
        self.next = row[self.index + 1] if self.index + 1 < self.stages else None
        self.members = [r[self.index] for r in grid]    # this stage on every machine
        kinds = cfg.stages.stage_devices()
        self.kind, self.speed = kinds[self.index]
        self.device = Device(factor(self.speed, max(v for _, v in kinds),
                                    cfg.stages.device_scale))
        spec, sgd = cfg.model, cfg.sgd
        ds = self.dataset = load_dataset(spec.dataset, spec.seed, **spec.dataset_kwargs())
        model = build_model({"n_in": ds.n_features, "n_classes": ds.n_classes,
                             **spec.model_spec()}, spec.seed)
        first = sum(cfg.stages.stage_layers[:self.index])
        self.layers = (first, first + cfg.stages.stage_layers[self.index] - 1)
        self.model = StageModel(model, *self.layers)
        self.params = self.model.params()
        self.pspec = param_spec(self.params)
        self.n_params = sum(p.size for p in self.params.values())
        self.width_in = model.sizes[self.layers[0]]
        self.width_out = model.sizes[self.layers[1] + 1]
        # device_time = "profiled": each operation's cost per sample on this machine's core
        if cfg.device.device_time == "profiled":
            self.forward_cost = cfg.device.step_cost(*self.layers, backward=False)
            self.backward_cost = cfg.device.step_cost(*self.layers, backward=True)
        self.opt = SGD(sgd.lr, sgd.momentum, sgd.weight_decay)
        self.batches = WorkerBatches(ds, cfg.stages.machines, self.machine, sgd.batch, spec.seed)
        self.slices = micro_slices(sgd.batch, cfg.stages.micro_batches)
        self.sec = Security(cfg.who.key_bytes, names.key(cfg.who.ps, cfg.who.train))
        self.fetch_stats = FetchStats()
        self.fetcher = training_fetcher(cfg.transport, app, self.sec.validator,
                                        self.fetch_stats, cfg.liveness.worker_timeout)
        self.published = Published()
        self.combine = Scheduled(self)           # a ring
        self.version = 0
        self.last_asked = 0.0
        self.delta = Delta()

    # the combine's Owner: one epoch, versions named as they are
    def round(self, v: int) -> int:
        return v

    @property
    def total_steps(self) -> int:
        return total_steps(self.cfg.sgd, len(self.dataset.X_train), self.cfg.stages.machines)

    # ---- serving ------------------------------------------------------------------------------

    def on_interest(self, name, _param, reply, ctx) -> None:
        cfg = self.cfg
        t = names.parse_stage_tensor(name)
        if t is not None:
            if (t.stage, t.train) != (self.name, cfg.who.train):
                return
            key: tuple = (t.version, "grad" if t.backward else "act", t.mb)
            seg = t.segment
        elif (p := names.parse_partial(name)) is not None:
            if (p.peer, p.train) != (self.name, cfg.who.train):
                return
            key, seg = (p.version, p.reduce, p.set, p.level, p.part), p.segment
        elif (c := names.parse_collect(name)) is not None:         # a done marker
            if (c.gpu, c.ps, c.train) != (self.name, cfg.who.ps, cfg.who.train):
                return
            key, seg = (c.step, "gradient"), c.segment
        else:
            return
        if key[0] >= self.version - 1:
            self.last_asked = monotonic()
        self.published.ask(key, seg, reply, ctx["deadline"])

    def _publish(self, v: int, backward: bool, mb: int, values: np.ndarray) -> None:
        wires = sign_segments(np.ascontiguousarray(values, np.float32).tobytes(),
                              lambda s: names.stage_tensor(self.name, self.cfg.who.train, v,
                                                           backward, mb, s),
                              self.sec.signer, FRESHNESS_MS)
        self.published.publish((v, "grad" if backward else "act", mb), wires)

    async def _fetch(self, producer: str, v: int, backward: bool, mb: int,
                     width: int) -> np.ndarray:
        """Micro-batch mb's activation from the previous stage or gradient from the next."""
        rows = self.slices[mb].stop - self.slices[mb].start
        values = await fetch_floats(
            self.fetcher, self.cfg,
            lambda s: names.stage_tensor(producer, self.cfg.who.train, v, backward, mb, s),
            rows * width, f"stage {producer}",
            f"step {v} ({'gradient' if backward else 'activation'} of micro-batch {mb})")
        return values.reshape(rows, width)

    # ---- the training -------------------------------------------------------------------------

    async def run(self, save: str | None) -> int:
        cfg = self.cfg
        self.app.attach_handler(names.node(self.name), self.on_interest)
        if not await self.app.register(names.node(self.name)):
            log.error("the forwarder refused to register /%s", self.name)
            return EXIT_JOB_FAILED
        total = self.total_steps
        self.metrics.write({
            "event": "start", "stage": self.index, "stages": self.stages,
            "machine": self.machine, "kind": self.kind, "speed": self.speed,
            "device_factor": self.device.factor, "layers": list(self.layers),
            "n_params": self.n_params, "total_steps": total, "mode": "sync",
            "collective": "pipeline", "members": self.members, "version": 0,
            "micro_batches": cfg.stages.micro_batches, "recompute": cfg.stages.recompute})
        log.info("stage %s (machine %d, stage %d of %d, %s x%.3g): layers %d-%d, %d "
                 "parameters, %d steps", self.name, self.machine + 1, self.index + 1,
                 self.stages, self.kind, self.device.factor, *self.layers, self.n_params, total)
        try:
            while self.version < total:
                await self.step(self.version)
        except (PeerLost, JobFailed) as e:
            log.error("training %s/%s stops at step %d: %s", cfg.who.ps, cfg.who.train,
                      self.version, e)
            self.metrics.write({"event": "failed", "reason": str(e), "version": self.version})
            self.end(EXIT_JOB_FAILED)
            return EXIT_JOB_FAILED
        if save:
            arrays: dict[str, Any] = dict(self.params)
            np.savez(save, **arrays)
        others = [a for a in (self.prev, self.next, *self.members) if a and a != self.name]
        await linger(self, others, self.version)
        self.end(EXIT_OK)
        log.info("training %s/%s done at step %d", cfg.who.ps, cfg.who.train, self.version)
        return EXIT_OK

    async def step(self, v: int) -> None:
        """One mini-batch through this stage, then the data-parallel average and the update."""
        cfg = self.cfg
        t0 = monotonic()
        started_at = self.metrics_time()
        work = StageWork(self.model, self.index, self.stages, cfg.sgd.batch,
                         cfg.stages.micro_batches, cfg.stages.recompute)
        X, y = self.batches.for_step(v)
        last = self.next is None
        if self.prev is None:
            for i, sl in enumerate(self.slices):
                work.activation(i, X[sl], y[sl] if last else None)
        busy = Busy()
        arrived = asyncio.Event()
        window = self.stages - self.index       # activations a stage holds at most (1F1B)
        try:
            async with asyncio.TaskGroup() as tg:   # a silent neighbour cancels the rest

                async def activation(i: int) -> None:
                    assert self.prev is not None
                    h = await self._fetch(self.prev, v, False, i, self.width_in)
                    work.activation(i, h, y[self.slices[i]] if last else None)
                    arrived.set()

                async def gradient(i: int) -> None:
                    assert self.next is not None
                    work.gradient(i, await self._fetch(self.next, v, True, i, self.width_out))
                    arrived.set()

                asked = 0 if self.prev is not None else cfg.stages.micro_batches
                forwards = 0
                recomputed = 0.0
                while not work.finished:
                    while asked < min(cfg.stages.micro_batches, forwards + window):
                        tg.create_task(activation(asked))
                        asked += 1
                    op = work.machine.ready()
                    if op is None:
                        self.device.idle()
                        await arrived.wait()
                        arrived.clear()
                        continue
                    # timed by its CPU time: rehearsed first (ndnps.ml.device: warm-up)
                    sent, timed = self.device.run(work.step, self._cost(op), work.rehearse)
                    assert sent is not None
                    if op.kind != FORWARD and cfg.stages.recompute:
                        recomputed += self._recompute_device(op, work)
                    busy.add(timed)
                    await self._wait(self.device.owe(timed), busy)  # the device is still at it
                    self._sent(v, sent)
                    if op.kind == FORWARD:
                        forwards += 1
                        if self.next is not None:
                            tg.create_task(gradient(op.mb))
        except* PeerLost as group:                  # one lost stage: the step cannot finish
            raise group.exceptions[0] from None
        await self._wait(self.device.settle(), busy)
        self.device.idle()                          # the synchronisation and the next step
        if cfg.device.device_time != "profiled":
            recomputed = work.recompute_cpu * self.device.factor
        pipeline_s = monotonic() - t0
        computed_at = self.metrics_time()
        grads = flatten(work.gradients())
        mean = await self.combine(v, grads, work.loss, busy.busy)
        self.opt.step(self.params, unflatten(mean, self.pspec))
        self.version = v + 1
        ready_at = self.metrics_time()
        self.metrics.write({
            "version": self.version, "loss": work.loss if last else None,
            "started_at": started_at, "computed_at": computed_at, "ready_at": ready_at,
            "pipeline": pipeline_s, "sync": ready_at - computed_at,
            "busy": busy.busy, "device": busy.device, "cpu": busy.cpu, "cost": busy.cost,
            "work_wall": busy.work, "warm": busy.warm, "ops": busy.ops,
            "measured_factor": busy.measured_factor(),
            "peak_activation_bytes": work.peak_bytes,
            "peak_activation_bytes_kept": work.peak_full_bytes,
            "recompute_cpu": work.recompute_cpu, "recompute_device": recomputed,
            "digest": digest(self.params),
            **self.delta.take({**self.app.traffic(), **asdict(self.fetch_stats)})})

    def _rows(self, op: Op) -> int:
        return self.slices[op.mb].stop - self.slices[op.mb].start

    def _cost(self, op: Op) -> float | None:
        """An operation's cost on this machine's core: profiled (its layers' per-sample costs
        × its samples; a backward after recomputation runs the forward again), or None:
        measured as it runs."""
        if self.cfg.device.device_time != "profiled":
            return None
        if op.kind == FORWARD:
            return self._rows(op) * self.forward_cost
        again = self.forward_cost if self.cfg.stages.recompute else 0.0
        return self._rows(op) * (self.backward_cost + again)

    def _recompute_device(self, op: Op, work: StageWork) -> float:
        """The device seconds a backward spent recomputing its activations (the time cost of
        the memory saved)."""
        if self.cfg.device.device_time == "profiled":
            return self._rows(op) * self.forward_cost * self.device.factor
        return 0.0                  # measured: the step's total, from StageWork, below

    async def _wait(self, seconds: float, busy: Busy) -> None:
        if seconds <= 0:
            return
        w0 = monotonic()            # the loop's time: a simulation's virtual time too
        await asyncio.sleep(seconds)
        waited = monotonic() - w0
        self.device.waited(waited)
        busy.wait(waited)

    def _sent(self, v: int, sent: Sent) -> None:
        if sent.forward is not None:
            self._publish(v, False, sent.op.mb, sent.forward)
        if sent.backward is not None:
            self._publish(v, True, sent.op.mb, sent.backward)

    def metrics_time(self) -> float:
        return monotonic() - self.metrics.start

    def end(self, code: int) -> None:
        self.metrics.write({"event": "end", "code": code, "version": self.version,
                            "collective": "pipeline", **self.app.traffic(),
                            **asdict(self.fetch_stats), **self.published.counts()})


# ---- command line ---------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = app_parser(
        "python -m ndnps.apps.stage",
        "ndnps pipeline stage: one device of one virtual machine. Reads [training] (machines, "
        "stage_kinds, stage_layers set), runs its layers forward and backward per "
        "micro-batch, exchanging activations and gradients with its neighbour stages, and "
        "averages its gradient with the same stage of the other machines, step after step.",
        "0 done, 1 error, 2 bad configuration, 3 the training stopped (a stage was lost)",
        "one per step")
    p.add_argument("--name", required=True, help="this stage's name: m<j>-<kind>")
    p.add_argument("--config", required=True, metavar="FILE",
                   help="TOML file with the [training] table (machines set)")
    p.add_argument("--save", metavar="FILE", help="write the stage's final parameters (.npz)")
    return p.parse_args(argv)


def prepare(argv: list[str] | None) -> Prepared | int:
    """Everything before the connection: the stage to run, or the exit code of a bad
    configuration (its message printed)."""
    args = parse_args(argv)
    begin(args, args.name)
    try:
        cfg = StageConfig.of(load_member(args.config, args.name))
        if not cfg.stages.machines:
            raise ConfigError("training.machines: 0 (not a pipeline training)")
        if cfg.device.device_time == "profiled":
            cfg.device.step_cost(0, 0, False)              # the profile is there
        model = cfg.model
        n_train = len(load_dataset(model.dataset, model.seed, **model.dataset_kwargs()).X_train)
        if steps_per_epoch(n_train, cfg.stages.machines, cfg.sgd.batch) < 1:
            raise ConfigError(f"training.batch: {n_train} samples over {cfg.stages.machines} "
                              f"machines hold no mini-batch of {cfg.sgd.batch}")
        if args.save:
            Path(args.save).parent.mkdir(parents=True, exist_ok=True)
    except (ConfigError, OSError) as e:
        print(f"stage: bad configuration: {e}", file=sys.stderr)
        return EXIT_USAGE
    metrics = MetricsWriter(args.metrics, role="stage", name=args.name)
    return Prepared(args, metrics, lambda app: Stage(cfg, args.name, app, metrics).run(args.save))


def main(argv: list[str] | None = None) -> int:
    return serve_prepared(prepare(argv))


if __name__ == "__main__":
    sys.exit(main())
