"""Step 1 of the `004_…` method (issue 27): pre-train the model briefly on `a` samples and
measure each layer — its forward and backward time per micro-batch, the bytes of its output
activation per micro-batch, its parameter bytes — as partition.Layer records."""
from __future__ import annotations

import statistics
import time

import numpy as np

from ndnps.ml.models import SGD, DenseNet
from ndnps.ml.stages import StageModel

from .partition import Layer


def profile(model: DenseNet, X: np.ndarray, y: np.ndarray, micro_batch: int, steps: int = 8,
            lr: float = 0.05) -> list[Layer]:
    """Each layer of `model`, measured over `steps` SGD steps of `micro_batch` samples drawn
    from (X, y) in order (the model is trained meanwhile: the method's pre-training)."""
    if micro_batch < 1 or len(X) < micro_batch:
        raise ValueError(f"need at least one micro-batch of {micro_batch} samples")
    layers = len(model.sizes) - 1
    stages = [StageModel(model, i, i) for i in range(layers)]
    fwd: list[list[float]] = [[] for _ in range(layers)]
    bwd: list[list[float]] = [[] for _ in range(layers)]
    opt = SGD(lr, momentum=0.0)
    for step in range(steps):
        at = (step * micro_batch) % (len(X) - micro_batch + 1)
        h, yb = X[at:at + micro_batch], y[at:at + micro_batch]
        saved = []
        for i, st in enumerate(stages):
            t0 = time.perf_counter()
            h, s = st.forward(h)
            fwd[i].append(time.perf_counter() - t0)
            saved.append(s)
        _, d = stages[-1].loss_grad(h, yb, micro_batch)
        grads: dict[str, np.ndarray] = {}
        for i in reversed(range(layers)):
            t0 = time.perf_counter()
            d, g = stages[i].backward(saved[i], d)
            bwd[i].append(time.perf_counter() - t0)
            grads.update(g)
        opt.step(model.params, {k: grads[k] for k in model.params})
    out = []
    for i in range(layers):
        fan_in, fan_out = model.sizes[i], model.sizes[i + 1]
        out.append(Layer(f"layer{i}", statistics.median(fwd[i][1:] or fwd[i]),
                         statistics.median(bwd[i][1:] or bwd[i]),
                         float(micro_batch * fan_out * 4), float((fan_in + 1) * fan_out * 4)))
    return out
