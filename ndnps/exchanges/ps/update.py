"""The update rule: how the PS turns the gradients it collected into the next parameters, as
ps-lite's ``KVServer::set_request_handle`` lets a server decide what a push does.

The PS calls ``rule.apply(params, optimizer, version, gradients)``: `params` is the model's
parameter dict (updated in place), `optimizer` the PS's (its state is what the PS
checkpoints), `version` the PS's current version, `gradients` a list of ``Contribution``
(the worker's index and its gradient).  The rule returns an ``Outcome``: whether the
parameters moved (the PS then makes and pushes version + 1) and the staleness it saw.

* sync mode: the PS collects every live worker's gradient of version v and calls the rule
  once; it makes v + 1 whatever the rule says (the workers wait for it).
* async mode: the PS calls the rule once per gradient, as it arrives; a gradient the rule
  does not apply is counted ``stale_dropped`` and the version stays.

Two rules ship, chosen by the training's mode (``rule_for``): ``SyncAverage`` (the mean of the
gradients in worker-index order, one optimizer step: bit for bit the arithmetic of
ndnps.ml.train.train_sync_reference) and ``AsyncApply`` (one gradient, unless more than
`max_staleness` versions old).  To plug another, subclass ``UpdateRule`` and give it to the
PS (``ParameterServer(cfg, app, update_rule=MyRule())`` or ``ps.set_update_rule(MyRule())``
before ``run()``)::

    class Median(UpdateRule):
        def apply(self, params, optimizer, version, gradients):
            vectors = np.stack([c.gradient.vector for c in gradients])
            optimizer.step(params, unflatten(np.median(vectors, axis=0), param_spec(params)))
            return Outcome(applied=True)

A rule that keeps state of its own (beyond the optimizer's) is not in the PS's checkpoint.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from ndnps.ml.train import average_grads
from ndnps.protocol.codec import param_spec, unflatten
from ndnps.protocol.messages import Gradient

Params = dict[str, np.ndarray]


class Optimizer(Protocol):
    def step(self, params: Params, grads: Params) -> None: ...     # updates params in place


@dataclass(frozen=True)
class Contribution:
    worker: int             # the worker's index: sync averages in this order
    gradient: Gradient


@dataclass(frozen=True)
class Outcome:
    applied: bool           # the parameters moved
    staleness: int = 0      # versions between the gradient's base and the current one (async)


class UpdateRule(ABC):
    @abstractmethod
    def apply(self, params: Params, optimizer: Optimizer, version: int,
              gradients: Sequence[Contribution]) -> Outcome:
        """Update `params` in place from `gradients` (collected at `version`)."""


class SyncAverage(UpdateRule):
    """The mean of the gradients, summed in worker-index order (float32 addition is not
    associative: any other order drifts from the reference), then one optimizer step."""

    def apply(self, params: Params, optimizer: Optimizer, version: int,
              gradients: Sequence[Contribution]) -> Outcome:
        if not gradients:
            raise ValueError("no gradient to average")
        spec = param_spec(params)
        ordered = sorted(gradients, key=lambda c: c.worker)
        optimizer.step(params, average_grads([unflatten(c.gradient.vector, spec)
                                              for c in ordered]))
        return Outcome(applied=True)


class AsyncApply(UpdateRule):
    """Each gradient on its own, unless computed on parameters more than `max_staleness`
    versions old (or on a version not made yet: a worker of another PS incarnation)."""

    def __init__(self, max_staleness: int) -> None:
        self.max_staleness = max_staleness

    def apply(self, params: Params, optimizer: Optimizer, version: int,
              gradients: Sequence[Contribution]) -> Outcome:
        (c,) = gradients
        staleness = version - c.gradient.base_version
        if staleness > self.max_staleness or staleness < 0:
            return Outcome(applied=False, staleness=staleness)
        optimizer.step(params, unflatten(c.gradient.vector, param_spec(params)))
        return Outcome(applied=True, staleness=staleness)


def rule_for(mode: str, max_staleness: int) -> UpdateRule:
    """The training mode's rule: "sync" averages, "async" applies each gradient."""
    if mode == "sync":
        return SyncAverage()
    if mode == "async":
        return AsyncApply(max_staleness)
    raise ValueError(f"no update rule for mode {mode!r}")
