"""One pipeline stage's work on a mini-batch (docs/hetero.md), sans-I/O: its layers
(ndnps.ml.stages) driven in its 1F1B order (ndnps.exchanges.pipeline.schedule.Stage). The caller
hands it what arrives — the previous stage's activations, the next stage's gradients — and calls
`step()` while it returns work done; each result says what to send on (an activation forward, a
gradient back). When every micro-batch is through, `gradients()` are the stage's parameters'
gradients for the whole mini-batch (summed over its micro-batches, each scaled by the mini-batch's
size: the mean, as the single process computes it), to be synchronised with the same stage of the
other machines and applied by the update rule.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ndnps.ml.stages import Saved, StageModel

from .schedule import FORWARD, Op, Stage


@dataclass
class Sent:
    op: Op
    forward: np.ndarray | None = None       # the activation for the next stage
    backward: np.ndarray | None = None      # the gradient for the previous stage
    loss: float | None = None               # the last stage's: its micro-batch's share


@dataclass
class StageWork:
    """`micro_inputs`: the first stage's micro-batches (X parts); `labels`: the last stage's
    (y parts); `batch`: the mini-batch's size (the gradients' scale)."""
    model: StageModel
    index: int
    stages: int
    batch: int
    micro: int
    recompute: bool = False
    machine: Stage = field(init=False)
    inputs: dict[int, np.ndarray] = field(default_factory=dict)
    grads_in: dict[int, np.ndarray] = field(default_factory=dict)
    labels: dict[int, np.ndarray] = field(default_factory=dict)
    saved: dict[int, Saved] = field(default_factory=dict)
    outputs: dict[int, np.ndarray] = field(default_factory=dict)   # the last stage's logits
    sums: dict[str, np.ndarray] = field(default_factory=dict)
    loss: float = 0.0
    peak_bytes: int = 0                     # activations held at once, at most
    peak_full_bytes: int = 0                # ... had they all been kept (no recomputation)
    recompute_cpu: float = 0.0              # CPU seconds spent recomputing them
    cpu_clock: Callable[[], float] = time.thread_time

    def __post_init__(self) -> None:
        self.machine = Stage(self.index, self.stages, self.micro)
        self.machine.activations = set()        # even the first's: its samples are handed in

    def activation(self, mb: int, h: np.ndarray, y: np.ndarray | None = None) -> None:
        """Micro-batch mb's input (the first stage: its samples), and its labels at the last."""
        self.inputs[mb] = h
        self.machine.activations.add(mb)
        if y is not None:
            self.labels[mb] = y

    def gradient(self, mb: int, d: np.ndarray) -> None:
        self.grads_in[mb] = d
        self.machine.gradients.add(mb)

    def rehearse(self) -> None:
        """The next operation's arithmetic, its results dropped and nothing changed: a device
        timed by its CPU time runs it first so that the timed run finds the operation's
        parameters and inputs in the caches, as a device finds them in its own memory
        (ndnps.ml.device, warm-up). The gradient sums are read, not added to."""
        op = self.machine.ready()
        if op is None:
            return
        if op.kind == FORWARD:
            self.model.forward(self.inputs[op.mb], keep=not self.recompute)
            return
        saved = self.model.restore(self.saved[op.mb])
        if self.model.is_last:
            d = self.model.loss_grad(self.outputs[op.mb], self.labels[op.mb], self.batch)[1]
        else:
            d = self.grads_in[op.mb]
        for k, g in self.model.backward(saved, d)[1].items():
            if k in self.sums:
                np.add(self.sums[k], g, out=g)

    def step(self) -> Sent | None:
        """Run the next operation if its inputs are here (the last stage's backward starts
        from its own loss)."""
        op = self.machine.ready()
        if op is None:
            return None
        self.machine.start(op)
        sent = self._forward(op) if op.kind == FORWARD else self._backward(op)
        self.machine.finish()
        self.peak_bytes = max(self.peak_bytes, sum(s.held_bytes for s in self.saved.values()))
        self.peak_full_bytes = max(self.peak_full_bytes,
                                   sum(s.full_bytes for s in self.saved.values()))
        return sent

    def _forward(self, op: Op) -> Sent:
        out, saved = self.model.forward(self.inputs.pop(op.mb), keep=not self.recompute)
        self.saved[op.mb] = saved
        if self.model.is_last:
            self.outputs[op.mb] = out
            return Sent(op)
        return Sent(op, forward=out)

    def _backward(self, op: Op) -> Sent:
        saved = self.saved.pop(op.mb)
        if not saved.complete:
            t0 = self.cpu_clock()
            saved = self.model.restore(saved)
            self.recompute_cpu += self.cpu_clock() - t0
            # held during this backward: the others' inputs and this one's layers, all of them
            self.peak_bytes = max(self.peak_bytes, saved.held_bytes
                                  + sum(s.held_bytes for s in self.saved.values()))
        loss = None
        if self.model.is_last:
            loss, d = self.model.loss_grad(self.outputs.pop(op.mb), self.labels.pop(op.mb),
                                           self.batch)
            self.loss += loss
        else:
            d = self.grads_in.pop(op.mb)
        d_in, grads = self.model.backward(saved, d)
        for k, g in grads.items():          # g is the backward's own array: summed in place
            if k in self.sums:
                self.sums[k] += g
            else:
                self.sums[k] = g
        return Sent(op, backward=d_in if self.index > 0 else None, loss=loss)

    @property
    def finished(self) -> bool:
        return self.machine.finished

    def gradients(self) -> dict[str, np.ndarray]:
        if not self.finished:
            raise ValueError(f"stage {self.index}: the mini-batch is not through")
        return {k: self.sums[k] for k in self.model.names}
