"""A worker's gradients and the collect exchange, step 5 from its side: the gradient of a step
computed on the newest parameters (a slower device emulated by `--slowdown`), signed as the
segments of /<gpu>/<ps>/<train>/<step>/<seg>, and the PS's collect Interests answered at once
or held until the gradient is ready (re-expressed ones are held and answered too).  A slower
device's rest is awaited, not slept: the worker keeps answering meanwhile, as a GPU leaves the
CPU free, and under a simulator's virtual clock the wait is virtual (ndnps.ml.device).  The first
segment sent starts the probe timer: the next version is due.  Belongs to one job, seen
through `Owner` (its model, batches, parameters, names, counters and receiver)."""
from __future__ import annotations

import asyncio
from typing import Any, Protocol

import numpy as np

from ndnps.client.pending import HeldInterests
from ndnps.client.security import Security, Signer
from ndnps.client.segments import sign_parts, sign_segments
from ndnps.exchanges.transport.buffers import Recent
from ndnps.exchanges.transport.push_rate import PushMeter
from ndnps.exchanges.transport.subscriber import Subscriber
from ndnps.ml.device import Device
from ndnps.ml.synthetic import LOSS, synthetic_gradient
from ndnps.ndn.clock import monotonic, wall
from ndnps.protocol import messages, names
from ndnps.protocol.codec import flatten, unflatten

from .faults import FaultInjector, Faults
from .receiver import Receiver

KEEP_GRADIENTS = 4          # steps whose signed gradients are kept for re-expressed collects


class GradCounters(Protocol):
    forged_sent: int
    gradients_sent: int


class Owner(Protocol):
    """What the gradients read and set of their job."""
    ps: str
    train: str
    gpu: str
    mode: str | None
    push_mode: str | None
    step: int
    last_from_ps: float
    model: Any
    batches: Any
    batch: int
    n_params: int
    pspec: list
    push_meter: PushMeter
    knobs: dict

    @property
    def params(self) -> np.ndarray | None: ...
    @property
    def newest(self) -> int: ...
    @property
    def done(self) -> bool: ...
    @property
    def sec(self) -> Security: ...
    @property
    def counters(self) -> GradCounters: ...
    @property
    def sent_event(self) -> asyncio.Event: ...
    @property
    def rx(self) -> Receiver: ...
    @property
    def sub(self) -> Subscriber | None: ...
    def now(self) -> float: ...


class Gradients:
    def __init__(self, job: Owner, faults: Faults, slowdown: float = 1.0,
                 synthetic: bool = False) -> None:
        self.job = job
        self.slowdown = slowdown                    # emulate a device that many times slower
        self.synthetic = synthetic                  # no model pass: ndnps.ml.synthetic
        self.device = Device(slowdown)              # (its work's cost x slowdown: ndnps.ml.device)
        self.held: HeldInterests[tuple[int, int]] = HeldInterests()    # (step, segment)
        self.store: Recent[int, list[bytes]] = Recent(KEEP_GRADIENTS)  # step -> signed segments
        self.faults = FaultInjector(faults)
        self.computed = -1                          # the highest step computed
        self.sent_steps: dict[int, float] = {}      # step -> when its first segment went out
        self.ready_at: dict[int, float] = {}        # step -> when it was computed
        self.step_record: dict = {}                 # the last computation, for the metrics

    def forget_from(self, step: int, before: float) -> None:
        """Steps from `step` on are to be computed (and collected) again: forget those the
        old PS collected (sent before `before`)."""
        for s in [s for s, at in self.sent_steps.items() if s >= step and at < before]:
            del self.sent_steps[s]
        for s in [s for s in self.store.keys() if s >= step]:
            self.store.pop(s)

    def profiled_cost(self) -> float | None:
        """device_time = "profiled" (the PS's knobs): a gradient's cost on this machine's core,
        from the profile of every layer (ndnps.ml.device); None: its CPU time as it runs."""
        knobs = self.job.knobs
        per = knobs.get("layer_seconds") or []
        if knobs.get("device_time") != "profiled" or not per:
            return None
        return sum(per) * self.job.batch

    async def compute(self, step: int) -> None:
        """The gradient of `step` on the newest parameters, published for the collect once
        the device's time is over (`compute` in the record: that time, the wait included)."""
        job = self.job
        assert job.params is not None               # setup() made them before training
        base = job.newest
        self.computed = max(self.computed, step)
        started = wall()
        t0 = monotonic()

        params = job.params

        def work() -> tuple[float, np.ndarray]:
            job.model.load_params(unflatten(params, job.pspec))
            X, y = job.batches.for_step(step)
            loss, grads = job.model.loss_and_grad(X, y)
            return loss, flatten(grads)

        def stand_in() -> tuple[float, np.ndarray]:
            return LOSS, synthetic_gradient(job.n_params, step, job.gpu)
        cost = self.profiled_cost()
        if self.synthetic:          # no work to measure: the profile's cost, else none
            (loss, vec), timed = self.device.run(stand_in, cost or 0.0)
        else:
            (loss, vec), timed = self.device.run(work, cost)
        if timed.owed > 0:          # a slower device: the same work takes longer
            await asyncio.sleep(timed.owed)
        compute = monotonic() - t0
        self.step_record = {"step": step, "base_version": base, "loss": loss, "compute": compute,
                            "compute_at": started}
        report = job.push_meter.report(base)
        push = report.to_wire() if report is not None else None
        aggregated = bool(job.knobs.get("aggregate_at"))
        per = messages.summable_values(bool(job.knobs.get("aggregate_via")))

        def name_of(s: int):
            return names.collect(job.gpu, job.ps, job.train, step, s)

        def sign(v: np.ndarray, signer: Signer) -> list[bytes]:
            # aggregation on: a header segment, then summable value segments (messages)
            if aggregated:
                return sign_parts(messages.gradient_parts(v, step, base, loss, compute, push,
                                                          per=per), name_of, signer)
            return sign_segments(messages.gradient_pieces(v, step, base, loss, compute, push),
                                 name_of, signer)

        wires = sign(vec, job.sec.signer)
        self.faults.gradient(step, lambda signer: sign(vec * 1e3, signer), job.ps, job.train)
        self.store.put(step, wires)
        self.ready_at[step] = job.now()
        for key in [k for k in self.held.keys() if k[0] == step]:
            if key[1] < len(wires):
                if self.held.release(key, self.wire_for(step, key[1])) and key[1] == 0:
                    self.gradient_sent(step)

    def wire_for(self, step: int, seg: int) -> bytes:
        forged = self.faults.forged_wire(step, seg)
        if forged is not None:
            self.job.counters.forged_sent += 1
            return forged
        wires = self.store.get(step)
        assert wires is not None                    # asked only for a step whose gradient is held
        return wires[seg]

    def answer_collect(self, c: names.Collect, reply, deadline: int) -> None:
        job = self.job
        job.last_from_ps = job.now()
        if job.mode == "async" and job.step < c.step <= self.computed + 1:
            # the PS has our step already (collected just before a resync took us back):
            # it wants the next one.  Never past what we computed: Interests are not signed,
            # a forged step must not make us skip the rest of the training
            job.step = c.step
            job.sent_event.set()
        wires = self.store.get(c.step)
        if wires is None:
            # not computed yet; or older than the gradients we keep, asked by a PS resumed
            # from its checkpoint: the resync its task offer starts takes us back there and
            # computes it again, and answers this.  (Ignored, the PS waited worker_timeout for
            # a live worker while the resync took its seconds, and dropped it: chaos)
            self.held.hold((c.step, c.segment), reply, deadline)
            if (job.mode == "sync" and job.push_mode == "persistent" and c.step > job.newest
                    and c.segment == 0):
                job.rx.probe_for_collect(c.step)
            return
        if c.segment >= len(wires):
            return
        reply(self.wire_for(c.step, c.segment))
        if c.segment == 0:
            self.gradient_sent(c.step)

    def gradient_sent(self, step: int) -> None:
        if step in self.sent_steps:
            return
        job = self.job
        self.sent_steps[step] = job.now()
        job.counters.gradients_sent += 1
        job.sent_event.set()
        if job.push_mode == "persistent" and job.sub is not None and not job.done:
            job.sub.sent(job.now(), job.ps)       # the probe timer starts
            job.rx.schedule()
