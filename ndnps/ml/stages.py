"""A DenseNet cut into pipeline stages (docs/hetero.md): stage s holds layers [first, last] and runs
their forward and backward on one micro-batch at a time; chained, the stages compute exactly
the whole model's loss and gradient (float32, the same operations in the same order), so a
pipeline trains as the single process does on the same mini-batches.

`forward(h, keep)` returns the stage's output and what its backward needs: every layer's input
(`keep=True`), or only the stage's own input (`keep=False`: recomputation — the activations
are dropped after the forward and recomputed from the input before the backward, in the
stage's idle time; `held_bytes` says what each way keeps).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .models import DenseNet, softmax_cross_entropy


@dataclass
class Saved:
    """What a forward leaves for its backward."""
    inputs: list[np.ndarray]        # each layer's input, or just the stage's (recomputation)
    complete: bool                  # False: the other layers' inputs are to be recomputed
    full_bytes: int = 0             # what every layer's input takes (held without recomputation)

    @property
    def held_bytes(self) -> int:
        return sum(a.nbytes for a in self.inputs)


class StageModel:
    """Layers [first, last] of `model` (their parameters are the model's arrays)."""

    def __init__(self, model: DenseNet, first: int, last: int) -> None:
        layers = len(model.sizes) - 1
        if not 0 <= first <= last < layers:
            raise ValueError(f"need 0 <= first <= last < {layers}, got {first}, {last}")
        self.model, self.first, self.last = model, first, last
        self.is_last = last == layers - 1

    @property
    def names(self) -> list[str]:
        return [f"{p}{i}" for i in range(self.first, self.last + 1) for p in ("W", "b")]

    def params(self) -> dict[str, np.ndarray]:
        return {k: self.model.params[k] for k in self.names}

    def _run(self, h: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        p = self.model.params
        h = np.asarray(h, p[f"W{self.first}"].dtype)
        inputs = []
        for i in range(self.first, self.last + 1):
            inputs.append(h)
            h = h @ p[f"W{i}"] + p[f"b{i}"]
            if not (self.is_last and i == self.last):        # ReLU but after the logits
                h = np.maximum(h, 0)
        return inputs, h

    def forward(self, h: np.ndarray, keep: bool = True) -> tuple[np.ndarray, Saved]:
        inputs, out = self._run(h)
        full = sum(a.nbytes for a in inputs)
        return out, Saved(inputs if keep else inputs[:1], keep, full)

    def restore(self, saved: Saved) -> Saved:
        """Recomputation: every layer's input again, from the stage's input."""
        if saved.complete:
            return saved
        return Saved(self._run(saved.inputs[0])[0], True, saved.full_bytes)

    def loss_grad(self, logits: np.ndarray, y: np.ndarray, scale: int) -> tuple[float,
                                                                              np.ndarray]:
        """The last stage's loss on a micro-batch (summed over it, ÷ `scale`: the mini-batch's
        size) and its gradient w.r.t. the logits (the same ÷ `scale`)."""
        losses, d = softmax_cross_entropy(logits, np.asarray(y), scale)
        return float(np.sum(losses)) / scale, d

    def backward(self, saved: Saved, d_out: np.ndarray) -> tuple[np.ndarray,
                                                                 dict[str, np.ndarray]]:
        """The gradient w.r.t. the stage's input and its parameters' gradients."""
        inputs = self.restore(saved).inputs
        p = self.model.params
        grads: dict[str, np.ndarray] = {}
        d = d_out
        for k, i in reversed(list(enumerate(range(self.first, self.last + 1)))):
            grads[f"W{i}"] = inputs[k].T @ d
            grads[f"b{i}"] = d.sum(axis=0)
            d = d @ p[f"W{i}"].T
            if i > 0:                           # the ReLU before this layer (none before the
                d = d * (inputs[k] > 0)         # model's first)
        return d, {k: grads[k] for k in self.names}
