"""The 1F1B pipeline schedule (ndnps.exchanges.pipeline.schedule): each stage's order, no
deadlock for any number of stages and micro-batches, the 1F1B activation bound, and the
simulator's times against the closed form."""
from __future__ import annotations

import pytest

from ndnps.exchanges.pipeline.schedule import (BACKWARD, FORWARD, Deadlock, Op, Stage, schedule,
                                               simulate)


def ops(text: str) -> list[Op]:
    return [Op(t[0], int(t[1:])) for t in text.split()]


def test_each_stage_warms_up_then_alternates_then_cools_down():
    assert schedule(0, 3, 4) == ops("F0 F1 F2 B0 F3 B1 B2 B3")
    assert schedule(1, 3, 4) == ops("F0 F1 B0 F2 B1 F3 B2 B3")
    assert schedule(2, 3, 4) == ops("F0 B0 F1 B1 F2 B2 F3 B3")
    assert schedule(0, 4, 2) == ops("F0 F1 B0 B1")          # fewer micro-batches than stages
    with pytest.raises(ValueError):
        schedule(3, 3, 4)


@pytest.mark.parametrize("stages", range(1, 7))
@pytest.mark.parametrize("micro", range(1, 9))
def test_no_schedule_deadlocks_and_every_stage_runs_each_micro_batch_once(stages, micro):
    sim = simulate([1.0] * stages, [2.0] * stages, micro, transfer=0.25)
    for s, order in enumerate(sim.order):
        assert order == schedule(s, stages, micro)
        assert sorted(o.mb for o in order if o.kind == FORWARD) == list(range(micro))
        assert sorted(o.mb for o in order if o.kind == BACKWARD) == list(range(micro))


@pytest.mark.parametrize("stages, micro", [(3, 4), (4, 8), (5, 3)])
def test_a_stage_holds_at_most_n_minus_s_activations(stages, micro):
    machines = [Stage(s, stages, micro) for s in range(stages)]
    while not all(m.finished for m in machines):       # run them in lock step
        moved = False
        for s, m in enumerate(machines):
            op = m.ready()
            if op is None:
                continue
            m.start(op)
            m.finish()
            moved = True
            if op.kind == FORWARD and s + 1 < stages:
                machines[s + 1].activations.add(op.mb)
            if op.kind == BACKWARD and s > 0:
                machines[s - 1].gradients.add(op.mb)
        assert moved
    for s, m in enumerate(machines):
        assert m.peak_held == min(stages - s, micro)


def test_equal_stages_take_the_closed_form_time():
    # n equal stages, k micro-batches, no transfer time: (k + n - 1)(f + b)
    for n, k in [(1, 4), (3, 4), (4, 8), (2, 1)]:
        sim = simulate([1.0] * n, [2.0] * n, k)
        assert sim.seconds == pytest.approx((k + n - 1) * 3.0)
        assert sim.busy == [3.0 * k] * n


def test_the_slowest_stage_sets_the_pace():
    sim = simulate([1.0, 3.0, 1.0], [1.0, 3.0, 1.0], 16)
    assert sim.idle[1] < 0.15 < min(sim.idle[0], sim.idle[2])
    assert sim.seconds == pytest.approx(16 * 6.0 + 2 * 2.0, rel=0.05)


def test_a_stage_refuses_what_is_not_ready():
    st = Stage(1, 3, 2)
    assert st.ready() is None                  # the activation of 0 has not come
    with pytest.raises(ValueError):
        st.start(Op(FORWARD, 0))
    st.activations.add(0)
    st.start(Op(FORWARD, 0))
    assert st.ready() is None                  # one at a time
    assert st.finish() == Op(FORWARD, 0)
    with pytest.raises(ValueError):
        st.finish()
    assert issubclass(Deadlock, RuntimeError)
