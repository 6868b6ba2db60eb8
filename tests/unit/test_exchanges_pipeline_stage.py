"""Pipeline stages running a mini-batch in memory (ndnps.exchanges.pipeline.stage):
the stages, driven by their 1F1B machines and handed each other's sends, compute the single
process's mini-batch gradient; recomputation changes nothing but the bytes held; a few SGD
steps of the pipeline equal the single process's."""
from __future__ import annotations

import numpy as np
import pytest

from ndnps.exchanges.pipeline.stage import StageWork
from ndnps.ml.models import MLP, SGD
from ndnps.ml.stages import StageModel

CUTS = [(0, 1), (2, 4), (5, 6)]


def batch(seed: int = 0, n: int = 32):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 10)).astype(np.float32), rng.integers(0, 4, n)


def run_minibatch(model, X, y, micro: int, recompute: bool = False,
                  rehearse: bool = False) -> list[StageWork]:
    works = [StageWork(StageModel(model, a, b), i, len(CUTS), len(X), micro, recompute)
             for i, (a, b) in enumerate(CUTS)]
    for mb, (xm, ym) in enumerate(zip(np.array_split(X, micro), np.array_split(y, micro))):
        works[0].activation(mb, xm)
        works[-1].labels[mb] = ym
    while not all(w.finished for w in works):
        moved = False
        for i, w in enumerate(works):
            if rehearse:
                w.rehearse()
            sent = w.step()
            if sent is None:
                continue
            moved = True
            if sent.forward is not None:
                works[i + 1].activation(sent.op.mb, sent.forward)
            if sent.backward is not None:
                works[i - 1].gradient(sent.op.mb, sent.backward)
        assert moved, "the pipeline is stuck"
    return works


@pytest.mark.parametrize("micro", [1, 4])
def test_the_stages_compute_the_mini_batch_gradient(micro):
    model = MLP(10, [16, 16, 16, 16, 16, 16], 4, 0)
    X, y = batch()
    works = run_minibatch(model, X, y, micro)
    ref_loss, ref = model.loss_and_grad(X, y)
    assert works[-1].loss == pytest.approx(ref_loss, rel=1e-5)
    grads = {k: v for w in works for k, v in w.gradients().items()}
    assert sorted(grads) == sorted(ref)
    for k in ref:
        np.testing.assert_allclose(grads[k], ref[k], rtol=1e-4, atol=1e-6)


def test_recomputation_changes_nothing_but_the_bytes_held():
    model = MLP(10, [16, 16, 16, 16, 16, 16], 4, 1)
    X, y = batch(1)
    kept = run_minibatch(model, X, y, 4)
    again = run_minibatch(model, X, y, 4, recompute=True)
    for a, b in zip(kept, again):
        for k, g in a.gradients().items():
            np.testing.assert_array_equal(g, b.gradients()[k])
    assert sum(w.peak_bytes for w in again) < sum(w.peak_bytes for w in kept)
    # ... but a backward holds its micro-batch's recomputed layers: the peak counts them (8
    # rows a micro-batch, float32, every layer's input of the stage)
    for w, (a, b) in zip(again, CUTS):
        one = sum(8 * model.sizes[i] * 4 for i in range(a, b + 1))
        assert w.peak_bytes >= one and w.peak_full_bytes >= one


def test_a_few_pipeline_steps_train_as_the_single_process():
    piped, single = MLP(10, [16] * 6, 4, 2), MLP(10, [16] * 6, 4, 2)
    opt_p, opt_s = SGD(0.1, 0.9), SGD(0.1, 0.9)
    for step in range(5):
        X, y = batch(10 + step)
        works = run_minibatch(piped, X, y, 4)
        opt_p.step(piped.params, {k: v for w in works for k, v in w.gradients().items()})
        _, g = single.loss_and_grad(X, y)
        opt_s.step(single.params, g)
    for k in single.params:
        np.testing.assert_allclose(piped.params[k], single.params[k], rtol=1e-3, atol=1e-5)


def test_gradients_before_the_end_are_refused():
    model = MLP(10, [16] * 6, 4, 0)
    w = StageWork(StageModel(model, 0, 1), 0, 3, 8, 2)
    with pytest.raises(ValueError):
        w.gradients()
    assert w.step() is None                     # nothing handed in yet


@pytest.mark.parametrize("recompute", [False, True])
def test_a_rehearsal_before_every_operation_changes_nothing(recompute):
    """A device timed by its CPU time rehearses each operation first (ndnps.ml.device's
    warm-up): the same gradients, the same loss, bit for bit, and the same bytes held."""
    model = MLP(10, [16] * 6, 4, 3)
    X, y = batch(3)
    plain = run_minibatch(model, X, y, 4, recompute)
    warmed = run_minibatch(model, X, y, 4, recompute, rehearse=True)
    for a, b in zip(plain, warmed):
        assert (a.loss, a.peak_bytes, a.peak_full_bytes) == (b.loss, b.peak_bytes,
                                                            b.peak_full_bytes)
        for k, g in a.gradients().items():
            np.testing.assert_array_equal(g, b.gradients()[k])
    idle = StageWork(StageModel(model, 0, 1), 0, 3, 8, 2)
    idle.rehearse()                             # nothing handed in: nothing to rehearse
    assert idle.step() is None
