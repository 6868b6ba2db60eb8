"""A device of another speed emulated on this CPU (ndnps.ml.device): work measured in
CPU time, the device's time = factor × that, the rest waited out — small debts carried until
they are worth a sleep, a longer wait credited to the next work. Fake clocks throughout."""
from __future__ import annotations

import pytest

from ndnps.ml.device import QUANTUM, Busy, Device, Timed, factor


class Clocks:
    """A CPU clock and a wall clock the test moves."""

    def __init__(self) -> None:
        self.cpu = self.wall = 0.0

    def work(self, cpu: float, wall: float):
        def run() -> str:
            self.cpu += cpu
            self.wall += wall
            return "done"
        return run


def device(f: float, clocks: Clocks) -> Device:
    return Device(f, cpu_clock=lambda: clocks.cpu, wall_clock=lambda: clocks.wall)


def test_factor_is_scale_times_the_fastest_over_the_speed():
    assert factor(4.0, 4.0) == 1.0
    assert factor(1.0, 4.0) == 4.0
    assert factor(2.0, 4.0, scale=16.0) == 32.0
    for bad in ((0.0, 4.0, 1.0), (5.0, 4.0, 1.0), (1.0, 4.0, 0.5)):
        with pytest.raises(ValueError):
            factor(*bad)


def test_a_piece_of_work_owes_the_device_time_beyond_its_wall_time():
    c = Clocks()
    d = device(8.0, c)
    out, t = d.run(c.work(cpu=0.010, wall=0.012))    # 2 ms of it the process waited
    assert out == "done"
    assert t == Timed(0.010, 0.012, pytest.approx(0.080), 0.010)
    assert t.owed == pytest.approx(0.068)
    assert d.owe(t) == pytest.approx(0.068)          # worth a sleep: all of it now


def test_a_profiled_cost_makes_the_device_time_whatever_the_cpu_time_was():
    """A core waking from idle takes longer for the same work: the profiled cost stands."""
    c = Clocks()
    d = device(8.0, c)
    _, t = d.run(c.work(cpu=0.003, wall=0.003), cost=0.001)
    assert (t.cpu, t.cost) == (0.003, 0.001) and t.device == pytest.approx(0.008)
    assert t.owed == pytest.approx(0.005)
    busy = Busy()
    busy.add(t)
    busy.wait(t.owed)
    assert busy.measured_factor() == pytest.approx(8.0)


def test_small_debts_are_carried_until_worth_a_sleep_and_an_overshoot_is_credited():
    c = Clocks()
    d = device(2.0, c)
    waits = []
    for _ in range(4):                               # 0.6 ms owed each time
        _, t = d.run(c.work(cpu=0.0006, wall=0.0006))
        waits.append(d.owe(t))
    assert waits[:3] == [0.0, 0.0, 0.0]              # 0.6, 1.2, 1.8 ms: under the quantum
    assert waits[3] == pytest.approx(0.0024) and waits[3] >= QUANTUM
    d.waited(0.0030)                                 # the sleep overshot by 0.6 ms
    assert d.debt == pytest.approx(-0.0006)
    _, t = d.run(c.work(cpu=0.0006, wall=0.0006))
    assert d.owe(t) == 0.0                           # owed 0.6 ms, credited 0.6 ms
    assert d.settle() == pytest.approx(0.0)          # ... and nothing left at the end


def test_what_is_left_at_the_end_of_a_step_is_settled():
    c = Clocks()
    d = device(3.0, c)
    _, t = d.run(c.work(cpu=0.0005, wall=0.0005))
    assert d.owe(t) == 0.0
    assert d.settle() == pytest.approx(0.001)


def test_a_busy_machine_owes_nothing_and_the_records_show_the_slower_device():
    c = Clocks()
    d = device(2.0, c)
    busy = Busy()
    _, t = d.run(c.work(cpu=0.010, wall=0.030))      # the CPU was shared: 30 ms of wall
    assert t.owed == 0.0 and d.owe(t) == 0.0
    busy.add(t)
    assert busy.measured_factor() == pytest.approx(3.0)     # not the device's 2


def test_busy_adds_work_and_waits():
    c = Clocks()
    d = device(4.0, c)
    busy = Busy()
    for _ in range(3):
        _, t = d.run(c.work(cpu=0.001, wall=0.001))
        busy.add(t)
        wait = d.owe(t)
        d.waited(wait)
        busy.wait(wait)
    assert busy.ops == 3
    assert busy.device == pytest.approx(0.012) and busy.busy == pytest.approx(0.012)
    assert busy.measured_factor() == pytest.approx(4.0)
    assert Busy().measured_factor() is None


def test_a_device_faster_than_the_cpu_is_refused():
    with pytest.raises(ValueError):
        Device(0.5)


def test_an_idle_device_spends_its_credit():
    """A sleep that overshot is credited to the next operation — unless the device waits for
    its input in between: then the next one starts late anyway, and owes its whole time."""
    c = Clocks()
    d = device(4.0, c)
    d.waited(0.001)                                 # 1 ms more than owed
    d.idle()
    assert d.debt == 0.0
    _, t = d.run(c.work(cpu=0.001, wall=0.001))
    assert d.owe(t) == pytest.approx(0.003)
    d.debt = 0.002
    d.idle()
    assert d.debt == 0.002                          # a debt is not forgiven


def test_a_measured_work_is_warmed_up_untimed_but_within_the_device_time():
    """The warm-up (the work's arithmetic once, thrown away) brings the caches to the work: its
    CPU time is not the work's cost, its wall time is part of the device's."""
    c = Clocks()
    d = device(8.0, c)
    warm = c.work(cpu=0.002, wall=0.003)
    out, t = d.run(c.work(cpu=0.001, wall=0.001), warm=warm)
    assert out == "done"
    assert (t.cpu, t.cost) == (pytest.approx(0.001), pytest.approx(0.001))
    assert t.device == pytest.approx(0.008)
    assert (t.wall, t.warm) == (pytest.approx(0.004), pytest.approx(0.003))
    assert t.owed == pytest.approx(0.004)
    busy = Busy()
    busy.add(t)
    assert (busy.work, busy.warm, busy.busy) == (pytest.approx(0.001), pytest.approx(0.003),
                                                 pytest.approx(0.004))
    # profiled: the CPU time does not count, nothing to warm
    calls = []
    _, t = d.run(c.work(cpu=0.001, wall=0.001), cost=0.002, warm=lambda: calls.append(1))
    assert calls == [] and t.warm == 0.0 and t.device == pytest.approx(0.016)
