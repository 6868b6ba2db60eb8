"""The planner's first step, Profile (docs/hetero.md): pre-train the model briefly on `a` samples
and measure each layer — its forward and backward time per micro-batch, the bytes of its output
activation per micro-batch, its parameter bytes — as partition.Layer records."""
from __future__ import annotations

import contextlib
import statistics
import time
from typing import Callable

import numpy as np

from ndnps.ml.models import SGD, DenseNet
from ndnps.ml.stages import StageModel

from .partition import Layer


def profile(model: DenseNet, X: np.ndarray, y: np.ndarray, micro_batch: int, steps: int = 8,
            lr: float = 0.05, clock: Callable[[], float] = time.thread_time) -> list[Layer]:
    """Each layer of `model`, measured over `steps` SGD steps of `micro_batch` samples drawn
    from (X, y) in order (the model is trained meanwhile: the profile's pre-training). Times
    are CPU times (`clock`), back to back: what an emulated device scales
    (ndnps.ml.device), and what other processes on the machine do not change; a backward
    includes adding its gradients to the mini-batch's, as a pipeline stage does."""
    if micro_batch < 1 or len(X) < micro_batch:
        raise ValueError(f"need at least one micro-batch of {micro_batch} samples")
    with _one_blas_thread():
        return _profile(model, X, y, micro_batch, steps, lr, clock)


def _one_blas_thread():
    """One BLAS thread, as the apps run (ndnps/apps/common/launch.limit_blas_threads): a device is
    one core, and the CPU time of a thread (`clock`) misses the work of BLAS's other threads
    (measured: a third of the apps' per-operation CPU time with two)."""
    try:
        from threadpoolctl import threadpool_limits      # comes with scikit-learn
    except ImportError:                                  # pragma: no cover
        return contextlib.nullcontext()
    return threadpool_limits(1)


def _profile(model: DenseNet, X: np.ndarray, y: np.ndarray, micro_batch: int, steps: int,
             lr: float, clock: Callable[[], float]) -> list[Layer]:
    layers = len(model.sizes) - 1
    stages = [StageModel(model, i, i) for i in range(layers)]
    fwd: list[list[float]] = [[] for _ in range(layers)]
    bwd: list[list[float]] = [[] for _ in range(layers)]
    opt = SGD(lr, momentum=0.0)
    sums: dict[str, np.ndarray] = {}
    for step in range(steps):
        at = (step * micro_batch) % (len(X) - micro_batch + 1)
        h, yb = X[at:at + micro_batch], y[at:at + micro_batch]
        saved = []
        for i, st in enumerate(stages):
            t0 = clock()
            h, s = st.forward(h)
            fwd[i].append(clock() - t0)
            saved.append(s)
        _, d = stages[-1].loss_grad(h, yb, micro_batch)
        grads: dict[str, np.ndarray] = {}
        for i in reversed(range(layers)):
            t0 = clock()
            d, g = stages[i].backward(saved[i], d)
            for k, v in g.items():          # a pipeline stage adds each micro-batch's to the
                if k in sums:               # mini-batch's, in place (from the second step on)
                    sums[k] += v
                else:
                    sums[k] = v.copy()
            bwd[i].append(clock() - t0)
            grads.update(g)
        opt.step(model.params, grads)
    out = []
    for i in range(layers):
        fan_in, fan_out = model.sizes[i], model.sizes[i + 1]
        out.append(Layer(f"layer{i}", statistics.median(fwd[i][1:] or fwd[i]),
                         statistics.median(bwd[i][1:] or bwd[i]),
                         float(micro_batch * fan_out * 4), float((fan_in + 1) * fan_out * 4)))
    return out
