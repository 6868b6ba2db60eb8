"""RFC 6298's arithmetic (ndnps.ndn.rto) and the PS's finish-time estimate
(ndnps.exchanges.ps.collector).  The probe timer's tests are in test_exchange_subscriber.py."""
from __future__ import annotations

import pytest

from ndnps.ndn.rto import MeanDeviation, RtoEstimator
from ndnps.exchanges.ps.collector import FinishTimeEstimator


def test_mean_deviation_is_rfc6298():
    md = MeanDeviation()
    md.update(1.0)
    assert (md.mean, md.dev) == (1.0, 0.5)
    md.update(2.0)
    assert md.dev == pytest.approx(0.75 * 0.5 + 0.25 * 1.0)
    assert md.mean == pytest.approx(0.875 * 1.0 + 0.125 * 2.0)


def test_rto_initial_then_mean_plus_k_dev_clamped():
    rto = RtoEstimator(initial=1.0, k=4, min_rto=0.05, max_rto=10)
    assert rto.rto == 1.0
    rto.observe(0.1)
    assert rto.rto == pytest.approx(0.1 + 4 * 0.05)
    for _ in range(50):
        rto.observe(0.001)
    assert rto.rto == 0.05                     # lower bound
    big = RtoEstimator(initial=1.0, max_rto=2.0)
    big.observe(100)
    assert big.rto == 2.0                      # upper bound


def test_backoff_doubles_caps_and_resets_on_a_sample():
    rto = RtoEstimator(initial=0.5, max_rto=3.0)
    seen = []
    for _ in range(5):
        seen.append(rto.rto)
        rto.backoff()
    assert seen == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert rto.backoffs == 3                   # stops counting at the cap
    rto.observe(0.2)
    assert rto.backoffs == 0
    assert rto.rto == pytest.approx(0.2 + 4 * 0.1)


def test_finish_time_estimator_sends_early_and_corrects_overestimates():
    est = FinishTimeEstimator()
    assert est.send_delay() == 0.0             # no history: ask at once
    est.observe(ready_after=3.0, sent_after=0.0, held=True)
    assert est.expected is None                # the first includes the worker's start-up
    for _ in range(10):
        est.observe(ready_after=0.100, sent_after=0.0, held=True)
    assert est.expected == pytest.approx(0.1, abs=1e-3)
    assert 0.0 < est.send_delay() <= 0.05      # well before the expected finish
    # over-estimate: it sends late, the worker answers at once (not held) -> pulled down
    high = FinishTimeEstimator(k=0, early=1.0)
    high.observe(5.0, 0.0, held=True)
    high.observe(1.0, 0.0, held=True)
    before = high.send_delay()
    for _ in range(10):
        sent = high.send_delay()
        high.observe(ready_after=sent + 0.001, sent_after=sent, held=False)
    assert high.send_delay() < before


def test_finish_time_estimate_does_not_ratchet_up_when_late_sends_look_held():
    # the truth: ready 10 ms after the reference; the round trip is 3 ms, and the PS takes
    # every answer for a held one: samples are max(send, ready) + RTT
    est = FinishTimeEstimator()
    for _ in range(200):
        sent = est.send_delay()
        est.observe(ready_after=max(sent, 0.010) + 0.003, sent_after=sent, held=True)
    assert est.expected == pytest.approx(0.013, abs=0.002)
    assert est.send_delay() < 0.010            # still asks before the gradient is ready
