"""Fault injection in a worker, for tests (documented, off by default), kept out of the
worker's exchanges so none of them branches on it:

* `--drop-pushes-prob P` drops each received pushed segment with probability P before it is
  processed, as if lost on the last link;
* `--forge-gradient-at STEP` answers the first Interest for each segment of that step's
  gradient with a copy signed under a wrong key (as an attacker would), the next ones with
  the real gradient: the PS must reject the forged copy and fetch again.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from ndnps.client.security import HmacSigner, Signer
from ndnps.protocol import names

FORGING_KEY = b"not-the-training-key"


@dataclass
class Faults:
    drop_pushes_prob: float = 0.0
    forge_gradient_at: int = -1
    seed: int | None = None


class FaultInjector:
    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        self.rng = random.Random(faults.seed)
        self.forged: dict[int, bytes] = {}          # segment -> forged wire, sent once

    def drop_push(self) -> bool:
        p = self.faults.drop_pushes_prob
        return bool(p) and self.rng.random() < p

    def gradient(self, step: int, forge: Callable[[Signer], list[bytes]], ps: str,
                 train: str) -> None:
        """The gradient of `step` was made: at the chosen step, make its forged twin
        (`forge(signer)`: the gradient's segments, poisoned, signed by `signer`)."""
        if step == self.faults.forge_gradient_at:
            self.forged = dict(enumerate(forge(HmacSigner(FORGING_KEY, names.key(ps, train)))))

    def forged_wire(self, step: int, seg: int) -> bytes | None:
        """The forged segment to answer instead of the real one, once."""
        if step == self.faults.forge_gradient_at and seg in self.forged:
            return self.forged.pop(seg)
        return None
