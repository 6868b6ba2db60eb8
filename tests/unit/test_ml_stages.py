"""A DenseNet cut into pipeline stages (ndnps.ml.stages): chained, the stages give the
whole model's loss and gradient; recomputation gives the same gradients and holds less."""
from __future__ import annotations

import numpy as np
import pytest

from ndnps.ml.models import MLP
from ndnps.ml.stages import StageModel


def model_and_batch(seed: int = 0):
    rng = np.random.default_rng(seed)
    model = MLP(12, [16, 16, 8, 8, 16], 5, seed)
    X = rng.standard_normal((24, 12)).astype(np.float32)
    y = rng.integers(0, 5, 24)
    return model, X, y


def run(stages: list[StageModel], X, y, micro: int, keep: bool = True):
    """Forward every micro-batch through the stages, backward in reverse; gradients summed."""
    grads: dict[str, np.ndarray] = {}
    loss = 0.0
    held = 0
    for Xm, ym in zip(np.array_split(X, micro), np.array_split(y, micro)):
        h, saved = Xm, []
        for st in stages:
            h, s = st.forward(h, keep)
            saved.append(s)
            held += s.held_bytes
        part, d = stages[-1].loss_grad(h, ym, len(X))
        loss += part
        for st, s in zip(reversed(stages), reversed(saved)):
            d, g = st.backward(s, d)
            for k, v in g.items():
                grads[k] = grads[k] + v if k in grads else v
    return loss, grads, held


@pytest.mark.parametrize("cuts", [[(0, 5)], [(0, 1), (2, 3), (4, 5)], [(0, 0), (1, 4), (5, 5)]])
def test_chained_stages_are_the_whole_model(cuts):
    model, X, y = model_and_batch()
    stages = [StageModel(model, a, b) for a, b in cuts]
    loss, grads, _ = run(stages, X, y, micro=1)
    ref_loss, ref = model.loss_and_grad(X, y)
    assert loss == pytest.approx(ref_loss, rel=1e-6)
    assert list(sorted(grads)) == sorted(ref)
    for k in ref:
        np.testing.assert_allclose(grads[k], ref[k], rtol=1e-5, atol=1e-7)


def test_micro_batches_sum_to_the_mini_batch_gradient():
    model, X, y = model_and_batch(1)
    stages = [StageModel(model, 0, 2), StageModel(model, 3, 5)]
    loss, grads, _ = run(stages, X, y, micro=4)
    ref_loss, ref = model.loss_and_grad(X, y)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    for k in ref:
        np.testing.assert_allclose(grads[k], ref[k], rtol=1e-4, atol=1e-6)


def test_recomputation_gives_the_same_gradients_and_holds_less():
    model, X, y = model_and_batch(2)
    stages = [StageModel(model, 0, 2), StageModel(model, 3, 5)]
    kept = run(stages, X, y, micro=3, keep=True)
    again = run(stages, X, y, micro=3, keep=False)
    assert kept[0] == again[0]
    for k in kept[1]:
        np.testing.assert_array_equal(kept[1][k], again[1][k])       # bit for bit
    assert again[2] < kept[2] / 2


def test_a_stage_names_its_layers_and_refuses_bad_bounds():
    model, _, _ = model_and_batch()
    st = StageModel(model, 2, 3)
    assert st.names == ["W2", "b2", "W3", "b3"] and set(st.params()) == set(st.names)
    assert not st.is_last and StageModel(model, 5, 5).is_last
    with pytest.raises(ValueError):
        StageModel(model, 3, 2)
    with pytest.raises(ValueError):
        StageModel(model, 0, 6)
