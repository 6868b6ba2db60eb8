"""ndnps.exchanges.ps.update: the update rules (sync average in worker-index order, async apply with
bounded staleness) and a rule plugged in from outside."""
from __future__ import annotations

import numpy as np
import pytest

from ndnps.exchanges.ps.update import (AsyncApply, Contribution, Outcome, SyncAverage, UpdateRule,
                                       rule_for)
from ndnps.ml.models import SGD
from ndnps.ml.train import average_grads
from ndnps.protocol.codec import flatten, param_spec, unflatten
from ndnps.protocol.messages import Gradient


def params() -> dict[str, np.ndarray]:
    return {"w": np.zeros((2, 2), np.float32), "b": np.zeros(3, np.float32)}


def gradient(vector, base_version: int = 0) -> Gradient:
    return Gradient(step=0, base_version=base_version,
                    vector=np.asarray(vector, np.float32), loss=1.0, compute=0.0)


def test_sync_average_sums_in_worker_index_order_whatever_the_arrival_order():
    # float32: (1e8 + 1) - 1e8 == 0 but (1e8 - 1e8) + 1 == 1, so the order shows
    big, one, minus = (np.full(7, x, np.float32) for x in (1e8, 1.0, -1e8))
    arrived = [Contribution(2, gradient(minus)), Contribution(0, gradient(big)),
               Contribution(1, gradient(one))]
    p = params()
    out = SyncAverage().apply(p, SGD(lr=1.0, momentum=0.0), version=5, gradients=arrived)
    assert out == Outcome(applied=True)
    np.testing.assert_array_equal(flatten(p), np.zeros(7, np.float32))   # (big + one) + minus
    other = params()
    SGD(lr=1.0, momentum=0.0).step(other, unflatten((big + minus + one) / 3, param_spec(other)))
    assert not np.array_equal(flatten(other), flatten(p))          # another order differs


def test_sync_average_is_the_reference_arithmetic_bit_for_bit():
    rng = np.random.default_rng(3)
    vectors = [rng.normal(size=7).astype(np.float32) for _ in range(4)]
    p, expected = params(), params()
    opt, ref_opt = SGD(0.1, 0.9, 1e-4), SGD(0.1, 0.9, 1e-4)
    for _ in range(3):                               # momentum carries over between steps
        SyncAverage().apply(p, opt, 0, [Contribution(i, gradient(v))
                                        for i, v in reversed(list(enumerate(vectors)))])
        spec = param_spec(expected)
        ref_opt.step(expected, average_grads([unflatten(v, spec) for v in vectors]))
    for k in p:
        np.testing.assert_array_equal(p[k], expected[k])


def test_sync_average_of_nothing_is_an_error():
    with pytest.raises(ValueError):
        SyncAverage().apply(params(), SGD(0.1), 0, [])


@pytest.mark.parametrize("base, applied, staleness", [
    (10, True, 0), (8, True, 2), (7, False, 3), (11, False, -1)])
def test_async_apply_drops_gradients_too_stale_or_from_the_future(base, applied, staleness):
    p = params()
    out = AsyncApply(max_staleness=2).apply(p, SGD(lr=0.5, momentum=0.0), version=10,
                                            gradients=[Contribution(0, gradient(np.ones(7),
                                                                                base))])
    assert out == Outcome(applied, staleness)
    expected = np.full(7, -0.5 if applied else 0.0, np.float32)
    np.testing.assert_array_equal(flatten(p), expected)


def test_async_apply_takes_one_gradient_at_a_time():
    with pytest.raises(ValueError):
        AsyncApply(2).apply(params(), SGD(0.1), 0, [Contribution(0, gradient(np.ones(7)))] * 2)


def test_the_mode_chooses_the_rule():
    assert isinstance(rule_for("sync", 4), SyncAverage)
    rule = rule_for("async", 4)
    assert isinstance(rule, AsyncApply) and rule.max_staleness == 4
    with pytest.raises(ValueError, match="no update rule"):
        rule_for("gossip", 4)


def test_a_plugged_rule_as_the_module_docstring_shows():
    class Median(UpdateRule):
        def apply(self, params, optimizer, version, gradients):
            vectors = np.stack([c.gradient.vector for c in gradients])
            optimizer.step(params, unflatten(np.median(vectors, axis=0), param_spec(params)))
            return Outcome(applied=True)

    p = params()
    Median().apply(p, SGD(lr=1.0, momentum=0.0), 0,
                   [Contribution(i, gradient(np.full(7, x))) for i, x in enumerate((1, 2, 90))])
    np.testing.assert_array_equal(flatten(p), np.full(7, -2.0, np.float32))
